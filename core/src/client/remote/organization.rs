//! What only a server has: API tokens, members and invitations, model provider settings,
//! budgets, the tool registry and Chats listed across Bots. Inherent methods of
//! [`RemoteClient`]; the in-memory mode has no such things.

use openbot_schema::{
    AcceptInvitation, AcceptedInvitation, ApiToken, Budget, BudgetScope, Chat, CreateInvitation,
    CreateOrganization, CreateToken, CreatedInvitation, CreatedOrganization, CreatedToken,
    HttpTool, Invitation, Member, Organization, ProviderSettings, PutBudget, PutHttpTool,
    PutProvider, TokenId,
};
use openbot_schema::{
    ApiTokenPage, BudgetPage, ChatPage, HttpToolPage, InvitationPage, MemberPage, OrganizationPage,
    ProviderSettingsPage,
};
use reqwest::Method;
use uuid::Uuid;

use super::RemoteClient;
use super::transport::Retry;
use crate::error::Error;

impl RemoteClient {
    /// Whether the server answers (needs no token).
    pub async fn health(&self) -> Result<(), Error> {
        self.transport
            .send(Method::GET, "/v1/health", None::<&()>, Retry::Safe)
            .await
            .map(|_| ())
    }

    /// The caller's Chats, oldest first.
    pub async fn list_chats(&self) -> Result<Vec<Chat>, Error> {
        self.all::<ChatPage>("/v1/chats").await
    }

    /// Creates an API token with at most the caller's rights; its secret is shown only here.
    pub async fn create_token(&self, request: &CreateToken) -> Result<CreatedToken, Error> {
        self.transport
            .json(
                Method::POST,
                "/v1/tokens",
                Some(request),
                Retry::BeforeSending,
            )
            .await
    }

    /// The caller's API tokens (never their secrets).
    pub async fn list_tokens(&self) -> Result<Vec<ApiToken>, Error> {
        self.all::<ApiTokenPage>("/v1/tokens").await
    }

    /// Revokes an API token at once.
    pub async fn revoke_token(&self, id: TokenId) -> Result<(), Error> {
        self.delete(&format!("/v1/tokens/{id}")).await
    }

    /// The organizations the caller's account belongs to.
    pub async fn list_organizations(&self) -> Result<Vec<Organization>, Error> {
        self.all::<OrganizationPage>("/v1/organizations").await
    }

    /// Creates an organization owned by the caller's account (owners and admins may); the
    /// answer holds the owner's first token there, shown only once.
    pub async fn create_organization(
        &self,
        request: &CreateOrganization,
    ) -> Result<CreatedOrganization, Error> {
        self.transport
            .json(
                Method::POST,
                "/v1/organizations",
                Some(request),
                Retry::BeforeSending,
            )
            .await
    }

    /// The organization's members.
    pub async fn list_members(&self) -> Result<Vec<Member>, Error> {
        self.all::<MemberPage>("/v1/members").await
    }

    /// Removes a member; their tokens and sessions stop working at once.
    pub async fn remove_member(&self, id: Uuid) -> Result<(), Error> {
        self.delete(&format!("/v1/members/{id}")).await
    }

    /// Invites a person; the invitation's secret is shown only here.
    pub async fn create_invitation(
        &self,
        request: &CreateInvitation,
    ) -> Result<CreatedInvitation, Error> {
        self.transport
            .json(
                Method::POST,
                "/v1/invitations",
                Some(request),
                Retry::BeforeSending,
            )
            .await
    }

    /// The open invitations.
    pub async fn list_invitations(&self) -> Result<Vec<Invitation>, Error> {
        self.all::<InvitationPage>("/v1/invitations").await
    }

    /// Revokes an invitation.
    pub async fn revoke_invitation(&self, id: Uuid) -> Result<(), Error> {
        self.delete(&format!("/v1/invitations/{id}")).await
    }

    /// Accepts an invitation (needs no token): the new member and their first token.
    pub async fn accept_invitation(
        &self,
        request: &AcceptInvitation,
    ) -> Result<AcceptedInvitation, Error> {
        self.transport
            .json(
                Method::POST,
                "/v1/invitations/accept",
                Some(request),
                Retry::BeforeSending,
            )
            .await
    }

    /// The organization's model provider settings (never the keys).
    pub async fn list_providers(&self) -> Result<Vec<ProviderSettings>, Error> {
        self.all::<ProviderSettingsPage>("/v1/models/providers")
            .await
    }

    /// Sets a provider's key (stored sealed) and base URL; `kind` is `openai`, `anthropic`
    /// or `compatible`. Setting the same values twice has the effect of once.
    pub async fn put_provider(
        &self,
        kind: &str,
        settings: &PutProvider,
    ) -> Result<ProviderSettings, Error> {
        self.transport
            .json(
                Method::PUT,
                &format!("/v1/models/providers/{kind}"),
                Some(settings),
                Retry::Safe,
            )
            .await
    }

    /// Removes a provider's settings.
    pub async fn delete_provider(&self, kind: &str) -> Result<(), Error> {
        self.delete(&format!("/v1/models/providers/{kind}")).await
    }

    /// The organization's budgets with what each scope spent.
    pub async fn list_budgets(&self) -> Result<Vec<Budget>, Error> {
        self.all::<BudgetPage>("/v1/budgets").await
    }

    /// Caps what all Turns of the organization (`target`: its ID), a Bot or a Chat may cost
    /// together. Setting the same cap twice has the effect of once.
    pub async fn put_budget(
        &self,
        scope: BudgetScope,
        target: Uuid,
        max_cost_micros: u64,
    ) -> Result<Budget, Error> {
        self.transport
            .json(
                Method::PUT,
                &format!("/v1/budgets/{}/{target}", scope.as_str()),
                Some(&PutBudget { max_cost_micros }),
                Retry::Safe,
            )
            .await
    }

    /// Removes a budget.
    pub async fn delete_budget(&self, scope: BudgetScope, target: Uuid) -> Result<(), Error> {
        self.delete(&format!("/v1/budgets/{}/{target}", scope.as_str()))
            .await
    }

    /// The organization's HTTP tools.
    pub async fn list_tools(&self) -> Result<Vec<HttpTool>, Error> {
        self.all::<HttpToolPage>("/v1/tools").await
    }

    /// Registers an HTTP tool under `name`: Bot tools of that name call its endpoint in Turns
    /// submitted from now on. Setting the same tool twice has the effect of once.
    pub async fn put_tool(&self, name: &str, tool: &PutHttpTool) -> Result<HttpTool, Error> {
        check_tool_name(name)?;
        self.transport
            .json(
                Method::PUT,
                &format!("/v1/tools/{name}"),
                Some(tool),
                Retry::Safe,
            )
            .await
    }

    /// Removes an HTTP tool.
    pub async fn delete_tool(&self, name: &str) -> Result<(), Error> {
        check_tool_name(name)?;
        self.delete(&format!("/v1/tools/{name}")).await
    }

    pub(super) async fn delete(&self, path: &str) -> Result<(), Error> {
        self.transport
            .send(Method::DELETE, path, None::<&()>, Retry::Safe)
            .await
            .map(|_| ())
    }
}

/// A tool name is a path segment: checked here, so no name can reach another path.
pub(super) fn check_tool_name(name: &str) -> Result<(), Error> {
    if openbot_schema::ToolDefinition::is_valid_name(name) {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "`{}` is not a tool name: use 1-64 of a-z A-Z 0-9 _ -",
            name.chars().take(80).collect::<String>()
        )))
    }
}
