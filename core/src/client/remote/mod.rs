//! The remote Client: the same [`Client`] calls, answered by an OpenBot server over HTTP.
//!
//! Requests carry the API token; reads, cancels and input with a command key are retried
//! after a lost connection (input without a key gets one here, so its retry is safe too);
//! event streams resume from their last sequence; error answers become the same [`Error`]
//! with the server's stable code, category and error ID.

mod call;
mod host_tools;
mod observe;
mod transport;

use async_trait::async_trait;
use openbot_schema::{ApprovalRequest, ApprovalState, DecideApproval, PlanMode};
use openbot_schema::{
    ApprovalRequestPage, BotPage, ChatEntryPage, MAX_PAGE_LIMIT, Page, PageQuery,
};
use openbot_schema::{
    Bot, BotId, BotSpec, BotUpdate, Chat, ChatEntry, ChatId, CreateChat, Execution, ExecutionId,
    SendInput, SendReceipt, ToolResult,
};
use openbot_schema::{DecideOutcome, OutcomeDecisionRecord, UnknownOutcomePage};
use reqwest::{Method, StatusCode};
use uuid::Uuid;

use self::host_tools::HostTools;
use self::transport::{Retry, Transport};
use super::{Client, ConnectOptions, ObserveStream};
use crate::error::Error;

/// How often a Chat deletion that the server still finishes is asked again.
const DELETE_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// A client of an OpenBot server. Cheap to share; every call is independent.
pub struct RemoteClient {
    transport: Transport,
    tools: HostTools,
}

impl std::fmt::Debug for RemoteClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteClient").finish_non_exhaustive()
    }
}

impl RemoteClient {
    /// A client of the server at `uri` (`http://host:port`), or of several nodes of one
    /// deployment (`http://a:8080,http://b:8080`): a request that got no answer, or a 502,
    /// 503 or 504, is tried again on the next node when it is safe to (a read, a `PUT`,
    /// input with its command key, a request the refused node never saw), and later requests
    /// stay on the node that answered; event streams resume from their cursor there.
    /// Nothing is sent until the first call. Models in `options` are not used: the server
    /// runs the models. A URL that does not parse is `invalid_input`.
    pub fn new(uri: &str, options: ConnectOptions) -> Result<Self, Error> {
        if options.computer.is_some() {
            return Err(Error::invalid_input(
                "`computer` attaches this machine in memory:// only; a server's Computers are \
                 machines paired with it",
            ));
        }
        let transport = Transport::new(uri, options.token)?;
        let tools = HostTools::new(transport.clone(), options.tools);
        Ok(Self { transport, tools })
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, Error> {
        self.transport
            .json(Method::GET, path, None::<&()>, Retry::Safe)
            .await
    }

    /// One page of the list at `path` (which may hold a filter query already).
    pub async fn page<P: Page>(&self, path: &str, query: &PageQuery) -> Result<P, Error> {
        let query = query.to_query_string();
        if query.is_empty() {
            return self.get(path).await;
        }
        let joiner = if path.contains('?') { '&' } else { '?' };
        self.get(&format!("{path}{joiner}{query}")).await
    }

    /// Every item of the list at `path`, following `next_cursor` to the last page.
    pub async fn all<P: Page>(&self, path: &str) -> Result<Vec<P::Item>, Error> {
        let mut items = Vec::new();
        let mut query = PageQuery::first(MAX_PAGE_LIMIT);
        loop {
            let (mut page, next) = self.page::<P>(path, &query).await?.into_parts();
            items.append(&mut page);
            match next {
                Some(cursor) => query.cursor = Some(cursor),
                None => return Ok(items),
            }
        }
    }

    async fn input(&self, path: String, mut input: SendInput) -> Result<SendReceipt, Error> {
        // A key of its own makes the request safe to send again after a lost answer.
        if input.command_key.is_none() {
            input.command_key = Some(format!("client-{}", uuid::Uuid::now_v7()));
        }
        let receipt: SendReceipt = self
            .transport
            .json(Method::POST, &path, Some(&input), Retry::Safe)
            .await?;
        self.tools.watch(receipt.execution_id);
        Ok(receipt)
    }
}

#[async_trait]
impl Client for RemoteClient {
    async fn create_bot(&self, spec: BotSpec) -> Result<Bot, Error> {
        self.transport
            .json(Method::POST, "/v1/bots", Some(&spec), Retry::BeforeSending)
            .await
    }

    async fn get_bot(&self, id: BotId) -> Result<Bot, Error> {
        self.get(&format!("/v1/bots/{id}")).await
    }

    async fn list_bots(&self) -> Result<Vec<Bot>, Error> {
        self.all::<BotPage>("/v1/bots").await
    }

    async fn update_bot(&self, id: BotId, update: BotUpdate) -> Result<Bot, Error> {
        // With a revision the update is conditional, so a retry cannot apply it twice.
        let retry = if update.revision.is_some() {
            Retry::Safe
        } else {
            Retry::BeforeSending
        };
        self.transport
            .json(
                Method::PATCH,
                &format!("/v1/bots/{id}"),
                Some(&update),
                retry,
            )
            .await
    }

    async fn delete_bot(&self, id: BotId) -> Result<(), Error> {
        self.transport
            .send(
                Method::DELETE,
                &format!("/v1/bots/{id}"),
                None::<&()>,
                Retry::BeforeSending,
            )
            .await
            .map(|_| ())
    }

    async fn create_chat(&self, bot: BotId) -> Result<Chat, Error> {
        let request = CreateChat { bot_id: bot };
        self.transport
            .json(
                Method::POST,
                "/v1/chats",
                Some(&request),
                Retry::BeforeSending,
            )
            .await
    }

    async fn get_chat(&self, id: ChatId) -> Result<Chat, Error> {
        self.get(&format!("/v1/chats/{id}")).await
    }

    async fn send(&self, chat: ChatId, input: SendInput) -> Result<SendReceipt, Error> {
        self.input(format!("/v1/chats/{chat}/messages"), input)
            .await
    }

    async fn steer(&self, chat: ChatId, input: SendInput) -> Result<SendReceipt, Error> {
        self.input(format!("/v1/chats/{chat}/steer"), input).await
    }

    async fn stop(&self, chat: ChatId) -> Result<(), Error> {
        self.transport
            .send(
                Method::POST,
                &format!("/v1/chats/{chat}/stop"),
                None::<&()>,
                Retry::Safe,
            )
            .await
            .map(|_| ())
    }

    async fn delete_chat(&self, chat: ChatId) -> Result<(), Error> {
        let path = format!("/v1/chats/{chat}");
        let mut first = true;
        loop {
            let answer = self
                .transport
                .send(Method::DELETE, &path, None::<&()>, Retry::Safe)
                .await;
            match answer {
                Ok(response) if response.status() == StatusCode::ACCEPTED => {
                    // Its Turns still end; the same request again waits for them.
                    first = false;
                    tokio::time::sleep(DELETE_POLL).await;
                }
                Ok(_) => return Ok(()),
                // Asked again after a 202: it is gone now.
                Err(err) if !first && err.code == openbot_schema::ErrorCode::NotFound => {
                    return Ok(());
                }
                Err(err) => return Err(err),
            }
        }
    }

    async fn history(&self, chat: ChatId) -> Result<Vec<ChatEntry>, Error> {
        self.all::<ChatEntryPage>(&format!("/v1/chats/{chat}/messages"))
            .await
    }

    async fn get_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        self.get(&format!("/v1/executions/{id}")).await
    }

    async fn observe(&self, id: ExecutionId, after: u64) -> Result<ObserveStream, Error> {
        let stream = observe::observe(self.transport.clone(), id, after).await?;
        // A client that comes back answers the calls it has handlers for.
        self.tools.watch(id);
        Ok(stream)
    }

    async fn cancel_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        self.transport
            .json(
                Method::POST,
                &format!("/v1/executions/{id}/cancel"),
                None::<&()>,
                Retry::Safe,
            )
            .await
    }

    async fn deliver_tool_result(&self, id: ExecutionId, result: ToolResult) -> Result<(), Error> {
        host_tools::deliver(&self.transport, id, &result).await
    }

    async fn list_approvals(
        &self,
        state: Option<ApprovalState>,
    ) -> Result<Vec<ApprovalRequest>, Error> {
        match state {
            Some(state) => {
                self.all::<ApprovalRequestPage>(&format!("/v1/approvals?state={}", state.as_str()))
                    .await
            }
            None => self.all::<ApprovalRequestPage>("/v1/approvals").await,
        }
    }

    async fn decide_approval(
        &self,
        id: Uuid,
        decision: DecideApproval,
    ) -> Result<ApprovalRequest, Error> {
        // A repeated decision answers `conflict`, so a decision is sent once.
        self.transport
            .json(
                Method::POST,
                &format!("/v1/approvals/{id}/decision"),
                Some(&decision),
                Retry::BeforeSending,
            )
            .await
    }

    async fn list_unknown_outcomes(
        &self,
        limit: Option<u32>,
        cursor: Option<String>,
    ) -> Result<UnknownOutcomePage, Error> {
        self.page("/v1/unknown-outcomes", &PageQuery { limit, cursor })
            .await
    }

    async fn decide_outcome(
        &self,
        id: ExecutionId,
        decision: DecideOutcome,
    ) -> Result<OutcomeDecisionRecord, Error> {
        // A repeated decision answers `conflict`, so a decision is sent once.
        self.transport
            .json(
                Method::POST,
                &format!("/v1/executions/{id}/outcome"),
                Some(&decision),
                Retry::BeforeSending,
            )
            .await
    }

    async fn pause_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        // Pausing twice has the effect of once.
        self.transport
            .json(
                Method::POST,
                &format!("/v1/executions/{id}/pause"),
                None::<&()>,
                Retry::Safe,
            )
            .await
    }

    async fn resume_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        self.transport
            .json(
                Method::POST,
                &format!("/v1/executions/{id}/resume"),
                None::<&()>,
                Retry::Safe,
            )
            .await
    }

    async fn plan_mode(&self, chat: ChatId) -> Result<PlanMode, Error> {
        self.get(&format!("/v1/chats/{chat}/plan-mode")).await
    }

    async fn set_plan_mode(&self, chat: ChatId, enabled: bool) -> Result<PlanMode, Error> {
        self.transport
            .json(
                Method::PUT,
                &format!("/v1/chats/{chat}/plan-mode"),
                Some(&PlanMode { enabled }),
                Retry::Safe,
            )
            .await
    }

    async fn call(
        &self,
        operation: &str,
        request: crate::client::ApiRequest,
    ) -> Result<crate::client::ApiAnswer, Error> {
        self.call_operation(operation, request).await
    }

    async fn close(&self) {
        self.transport.closed().cancel();
    }
}
