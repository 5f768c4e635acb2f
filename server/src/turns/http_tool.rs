//! HTTP tools: a declared endpoint that receives each call's arguments.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::outbound::OutboundPolicy;
use openbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use openbot_schema::{BotId, ToolDefinition};
use serde_json::Value;

use crate::tools::CallTemplate;
use crate::vaults::{OpenError, ReaderPath, VaultOpener};

/// Where an HTTP tool's Vault references are opened, and as whom: the Turn's organization,
/// member and Bot (the tool's own name completes the reader path).
#[derive(Debug, Clone)]
pub struct ToolVault {
    /// Checks the rules and opens the fields at each send.
    pub opener: VaultOpener,
    /// The Turn's organization.
    pub organization: uuid::Uuid,
    /// The member the Turn is for.
    pub member: uuid::Uuid,
    /// The Turn's Bot.
    pub bot: BotId,
}

/// A tool whose calls are POSTed to an endpoint. The response body (text) is the result; a
/// non-2xx status is a tool error the model sees. The client keeps to the platform's outbound
/// policy ([`crate::platform::Platform::tool_client`]); an address in the URL is checked
/// before each call, and a refused request is a tool error that says so.
///
/// Vault references in the tool's headers and body fields are opened here, at the send and
/// for it only: the values go into the request and nowhere else (not the call's events, its
/// result, an error or a log line). A missing item, field or rule is a tool error naming the
/// item ID and field, and nothing is sent.
pub struct HttpTool {
    definition: ToolDefinition,
    url: String,
    template: CallTemplate,
    vault: Option<ToolVault>,
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
            template: CallTemplate::default(),
            vault: None,
            client,
            outbound,
        }
    }

    /// Adds `template`'s headers and body fields to each call, opening its Vault references
    /// with `vault` (without one, a reference is a tool error).
    pub fn with_template(mut self, template: CallTemplate, vault: Option<ToolVault>) -> Self {
        self.template = template;
        self.vault = vault;
        self
    }

    /// The headers and body of one call, references opened as of now, and the opened values.
    async fn request_parts(
        &self,
        arguments: &Value,
    ) -> Result<(Vec<(String, String)>, Value, Vec<String>), ToolError> {
        if self.template.is_empty() {
            return Ok((Vec::new(), arguments.clone(), Vec::new()));
        }
        let refs = self
            .template
            .references()
            .map_err(|e| ToolError::new(e.to_string()))?;
        let values = if refs.is_empty() {
            Default::default()
        } else {
            let vault = self.vault.as_ref().ok_or_else(|| {
                ToolError::new(
                    "this tool's Vault references cannot be opened here: the work has no member",
                )
            })?;
            let path = ReaderPath {
                organization: vault.organization,
                member: vault.member,
                bot: vault.bot,
                tool: self.definition.name.clone(),
                tool_url: self.url.clone(),
            };
            vault
                .opener
                .open(&refs, &path)
                .await
                .map_err(|err| match err {
                    OpenError::Refused(why) => ToolError::new(why),
                    // The cause is the store's; it holds no value.
                    OpenError::Store(err) => {
                        tracing::warn!(tool = %self.definition.name, error = %err, "Vault fields could not be read");
                        ToolError::new("the Vault could not be read; the call was not sent")
                    }
                })?
        };
        let (headers, body) = self
            .template
            .render(arguments, &values)
            .map_err(|e| ToolError::new(e.to_string()))?;
        Ok((headers, body, values.into_values().collect()))
    }
}

/// What stands for an opened Vault value in a tool's answer.
pub const REDACTED: &str = "[vault value]";

/// `text` with every opened value of at least 4 bytes (shorter ones would blank out ordinary
/// text) replaced by [`REDACTED`].
fn redacted(mut text: String, opened: &[String]) -> String {
    for value in opened.iter().filter(|v| v.len() >= 4) {
        if text.contains(value.as_str()) {
            text = text.replace(value.as_str(), REDACTED);
        }
    }
    text
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
        let (headers, body, opened) = self.request_parts(&arguments).await?;
        let mut request = self
            .client
            .post(&self.url)
            .header("Idempotency-Key", &context.idempotency_key);
        for (name, value) in headers {
            let Ok(mut value) = reqwest::header::HeaderValue::from_str(&value) else {
                // Never the value in the message: it may hold a secret.
                return Err(ToolError::new(format!(
                    "the value of header `{name}` is not a valid header value once its Vault references are opened; the call was not sent"
                )));
            };
            value.set_sensitive(true);
            request = request.header(name, value);
        }
        let response =
            request
                .json(&body)
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
        // An endpoint that echoes what it received must not hand a secret to the model.
        let body = redacted(body, &opened);
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
