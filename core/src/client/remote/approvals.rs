//! Approvals and delegate tools on a server: requests to read, the rules that create them,
//! and the delegate tools of the tool registry. Inherent methods of [`RemoteClient`] (listing
//! and deciding requests are on the `Client` trait).

use openbot_schema::{
    ApprovalRequest, ApprovalRule, CreateApprovalRule, DelegateTool, PutDelegateTool,
};
use openbot_schema::{ApprovalRulePage, DelegateToolPage};
use reqwest::Method;
use uuid::Uuid;

use super::RemoteClient;
use super::organization::check_tool_name;
use super::transport::Retry;
use crate::error::Error;

impl RemoteClient {
    /// One approval request the caller may decide.
    pub async fn get_approval(&self, id: Uuid) -> Result<ApprovalRequest, Error> {
        self.get(&format!("/v1/approvals/{id}")).await
    }

    /// The organization's approval rules, oldest first.
    pub async fn list_rules(&self) -> Result<Vec<ApprovalRule>, Error> {
        self.all::<ApprovalRulePage>("/v1/approval-rules").await
    }

    /// Adds an approval rule (for the organization or a Bot: owners and admins; for oneself:
    /// any member).
    pub async fn create_rule(&self, rule: &CreateApprovalRule) -> Result<ApprovalRule, Error> {
        self.transport
            .json(
                Method::POST,
                "/v1/approval-rules",
                Some(rule),
                Retry::BeforeSending,
            )
            .await
    }

    /// Removes an approval rule.
    pub async fn delete_rule(&self, id: Uuid) -> Result<(), Error> {
        self.delete(&format!("/v1/approval-rules/{id}")).await
    }

    /// The organization's delegate tools.
    pub async fn list_delegates(&self) -> Result<Vec<DelegateTool>, Error> {
        self.all::<DelegateToolPage>("/v1/delegates").await
    }

    /// Registers a delegate tool under `name`: Bot tools of that name hand their task to the
    /// named Bot as a child Turn, in Turns submitted from now on.
    pub async fn put_delegate(
        &self,
        name: &str,
        tool: &PutDelegateTool,
    ) -> Result<DelegateTool, Error> {
        check_tool_name(name)?;
        self.transport
            .json(
                Method::PUT,
                &format!("/v1/delegates/{name}"),
                Some(tool),
                Retry::Safe,
            )
            .await
    }

    /// Removes a delegate tool.
    pub async fn delete_delegate(&self, name: &str) -> Result<(), Error> {
        check_tool_name(name)?;
        self.delete(&format!("/v1/delegates/{name}")).await
    }
}
