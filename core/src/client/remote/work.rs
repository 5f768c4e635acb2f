//! Pausing and resuming work on a server. Inherent methods of [`RemoteClient`]: the in-memory
//! mode has no pause.

use openbot_schema::{Execution, ExecutionId};
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
}
