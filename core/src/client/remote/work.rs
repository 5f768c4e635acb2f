//! Pausing and resuming work, and plan mode, on a server. Inherent methods of
//! [`RemoteClient`]: the in-memory mode has neither.

use openbot_schema::{ChatId, Execution, ExecutionId, PlanMode};
use reqwest::Method;

use super::RemoteClient;
use super::transport::Retry;
use crate::error::Error;

impl RemoteClient {
    /// Pauses an execution and its descendants: they stop sending, let calls in flight save
    /// their results, and wait until resumed; paused time does not count against a time
    /// limit. Pausing twice has the effect of once.
    pub async fn pause_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        self.transport
            .json(
                Method::POST,
                &format!("/v1/executions/{id}/pause"),
                None::<&()>,
                Retry::Safe,
            )
            .await
    }

    /// Resumes a paused execution and its paused descendants; `conflict` while a parent of it
    /// is paused.
    pub async fn resume_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        self.transport
            .json(
                Method::POST,
                &format!("/v1/executions/{id}/resume"),
                None::<&()>,
                Retry::Safe,
            )
            .await
    }

    /// Whether a Chat is in plan mode.
    pub async fn plan_mode(&self, chat: ChatId) -> Result<PlanMode, Error> {
        self.get(&format!("/v1/chats/{chat}/plan-mode")).await
    }

    /// Turns a Chat's plan mode on or off: in plan mode its Bot may only propose a plan, and an
    /// approved plan switches plan mode off.
    pub async fn set_plan_mode(&self, chat: ChatId, enabled: bool) -> Result<PlanMode, Error> {
        self.transport
            .json(
                Method::PUT,
                &format!("/v1/chats/{chat}/plan-mode"),
                Some(&PlanMode { enabled }),
                Retry::Safe,
            )
            .await
    }
}
