//! HTTP tools: a declared endpoint that receives each call's arguments.

use std::time::Duration;

use async_trait::async_trait;
use openbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use openbot_schema::ToolDefinition;
use serde_json::Value;

/// A tool whose calls are POSTed to an endpoint. The response body (text) is the result; a
/// non-2xx status is a tool error the model sees.
pub struct HttpTool {
    definition: ToolDefinition,
    url: String,
    client: reqwest::Client,
}

impl HttpTool {
    /// A tool that posts to `url`.
    pub fn new(definition: ToolDefinition, url: String, client: reqwest::Client) -> Self {
        Self {
            definition,
            url,
            client,
        }
    }

    /// The HTTP client tools share: 10 s to connect, 5 min per call.
    pub fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(300))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default()
    }
}

#[async_trait]
impl Tool for HttpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let response = self
            .client
            .post(&self.url)
            .header("Idempotency-Key", &context.idempotency_key)
            .json(&arguments)
            .send()
            .await
            .map_err(|e| {
                ToolError::new(format!(
                    "the tool endpoint could not be reached: {}",
                    e.without_url()
                ))
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
