//! HTTP tools: a declared endpoint that receives each call's arguments.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::outbound::OutboundPolicy;
use openbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use openbot_schema::ToolDefinition;
use serde_json::Value;

/// A tool whose calls are POSTed to an endpoint. The response body (text) is the result; a
/// non-2xx status is a tool error the model sees. The client keeps to the platform's outbound
/// policy ([`crate::platform::Platform::tool_client`]); an address in the URL is checked
/// before each call, and a refused request is a tool error that says so.
pub struct HttpTool {
    definition: ToolDefinition,
    url: String,
    client: reqwest::Client,
    outbound: Arc<OutboundPolicy>,
}

impl HttpTool {
    /// A tool that posts to `url` with `client`, built from `outbound`.
    pub fn new(
        definition: ToolDefinition,
        url: String,
        client: reqwest::Client,
        outbound: Arc<OutboundPolicy>,
    ) -> Self {
        Self {
            definition,
            url,
            client,
            outbound,
        }
    }
}

#[async_trait]
impl Tool for HttpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        self.outbound
            .check_url(&self.url)
            .map_err(|e| ToolError::new(e.to_string()))?;
        let response = self
            .client
            .post(&self.url)
            .header("Idempotency-Key", &context.idempotency_key)
            .json(&arguments)
            .send()
            .await
            .map_err(|e| match OutboundPolicy::refusal(&e) {
                Some(refusal) => ToolError::new(refusal),
                None => ToolError::new(format!(
                    "the tool endpoint could not be reached: {}",
                    e.without_url()
                )),
            })?;
        let status = response.status();
        let body = response.text().await.map_err(|e| {
            ToolError::new(format!(
                "the tool endpoint's answer broke off: {}",
                e.without_url()
            ))
        })?;
        if status.is_success() {
            Ok(ToolOutput::text(body))
        } else {
            Err(ToolError::new(format!(
                "the tool endpoint answered HTTP {}: {}",
                status.as_u16(),
                body.chars().take(500).collect::<String>()
            )))
        }
    }
}
