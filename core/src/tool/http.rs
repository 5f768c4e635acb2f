//! HTTP tools: a registered endpoint that receives each call's arguments. One implementation
//! for both hosts (the server's durable Turns and the in-memory Client), and one check of a
//! registration ([`check_http_tool`]) that both answer `PUT /v1/tools/{name}` with.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use openbot_schema::{PutHttpTool, ToolDefinition};
use serde_json::Value;

use super::{CheckedSchema, Tool, ToolContext, ToolError, ToolOutput};
use crate::outbound::OutboundPolicy;

/// How often a retry-safe call whose answer was lost is sent in all, when the host resends
/// in process (see [`HttpTool::resend_lost_answers`]).
pub const LOST_ANSWER_ATTEMPTS: u32 = 3;

/// Checks an HTTP tool registration under `name`: the name and schema follow the rules of
/// every tool ([`CheckedSchema`]), the URL is `http://` or `https://` with a host, and an
/// address written in it is one `outbound` allows. Returns the definition the model sees.
/// The error is for the caller (`invalid_input`).
pub fn check_http_tool(
    name: &str,
    request: &PutHttpTool,
    outbound: &OutboundPolicy,
) -> Result<ToolDefinition, String> {
    let definition = ToolDefinition {
        name: name.to_string(),
        description: request.description.clone(),
        input_schema: request.input_schema.clone(),
    };
    CheckedSchema::new(definition.clone()).map_err(|e| e.to_string())?;
    // A URL shows up in logs and errors: secrets go in headers or the body, never there.
    if request.url.contains("{{vault.") {
        return Err(
            "a tool's url may not hold Vault references: put them in headers or body".into(),
        );
    }
    let valid_url = reqwest::Url::parse(&request.url)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
    if !valid_url {
        return Err("url must be an http:// or https:// URL".into());
    }
    outbound
        .check_url(&request.url)
        .map_err(|e| e.to_string())?;
    Ok(definition)
}

/// A tool whose calls are POSTed to an endpoint with an `Idempotency-Key` that is the same for
/// every try of one call. The response body (text) is the result; a non-2xx status is a tool
/// error the model sees. The client keeps to the outbound policy (build it with
/// [`OutboundPolicy::client_builder`]); an address in the URL is checked before each call, and
/// a refused request is a tool error that says so.
pub struct HttpTool {
    definition: ToolDefinition,
    url: String,
    client: reqwest::Client,
    outbound: Arc<OutboundPolicy>,
    /// `None`: the host decides about lost answers (a durable call log); otherwise whether
    /// this tool resends them.
    resend: Option<bool>,
    /// Adds headers and body fields to each call (a server's Vault references), if any.
    parts: Option<Arc<dyn RequestParts>>,
}

/// The headers and body of one call, prepared at its send.
#[derive(Debug, Default)]
pub struct PreparedCall {
    /// Extra headers, sent as sensitive (never logged by the HTTP client).
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Value,
    /// Values that must not reach the model: replaced by [`REDACTED`] in the answer.
    pub redact: Vec<String>,
}

/// What builds each call's request from its arguments, at the send and for it only (the
/// server opens a tool's Vault references here). A refusal is a tool error the model reads;
/// it must name no secret.
#[async_trait]
pub trait RequestParts: Send + Sync {
    /// The headers and body of one call of `tool` with `arguments`; `from_code` when a Code
    /// Mode program made the call ([`ToolContext::from_code`]).
    async fn prepare(
        &self,
        tool: &str,
        arguments: &Value,
        from_code: bool,
    ) -> Result<PreparedCall, ToolError>;
}

/// What stands for a redacted value in a tool's answer.
pub const REDACTED: &str = "[vault value]";

/// `text` with every value of at least 4 bytes (shorter ones would blank out ordinary text)
/// replaced by [`REDACTED`]. Hosts use it for every answer that may echo an opened secret.
pub fn redacted(mut text: String, values: &[String]) -> String {
    for value in values.iter().filter(|v| v.len() >= 4) {
        if text.contains(value.as_str()) {
            text = text.replace(value.as_str(), REDACTED);
        }
    }
    text
}

impl HttpTool {
    /// A tool that posts to `url` with `client`, built from `outbound`. It sends each call
    /// once: a host that keeps a durable call log decides about lost answers itself.
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
            resend: None,
            parts: None,
        }
    }

    /// Builds each call's headers and body with `parts` instead of sending the arguments as
    /// they are.
    pub fn with_parts(mut self, parts: Arc<dyn RequestParts>) -> Self {
        self.parts = Some(parts);
        self
    }

    /// Whether a call whose answer was lost in transit (the connection broke after the request
    /// may have arrived) is sent again here, with the same `Idempotency-Key`, up to
    /// [`LOST_ANSWER_ATTEMPTS`] tries: only for an endpoint registered `retry_safe`. Without
    /// it such a call is never repeated and the model is told its outcome is unknown.
    pub fn resend_lost_answers(mut self, retry_safe: bool) -> Self {
        self.resend = Some(retry_safe);
        self
    }

    async fn send(&self, call: &PreparedCall, key: &str) -> Result<reqwest::Response, SendError> {
        let mut request = self.client.post(&self.url).header("Idempotency-Key", key);
        for (name, value) in &call.headers {
            let Ok(mut value) = reqwest::header::HeaderValue::from_str(value) else {
                // Never the value in the message: it may hold a secret.
                return Err(SendError::Refused(format!(
                    "the value of header `{name}` is not a valid header value; the call was not sent"
                )));
            };
            value.set_sensitive(true);
            request = request.header(name.as_str(), value);
        }
        request
            .json(&call.body)
            .send()
            .await
            .map_err(|e| match OutboundPolicy::refusal(&e) {
                Some(refusal) => SendError::Refused(refusal),
                // Nothing reached the endpoint.
                None if e.is_connect() => SendError::Unreachable(e.without_url().to_string()),
                None => SendError::Lost(e.without_url().to_string()),
            })
    }
}

enum SendError {
    Refused(String),
    Unreachable(String),
    Lost(String),
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
        let call = match &self.parts {
            Some(parts) => {
                parts
                    .prepare(&self.definition.name, &arguments, context.from_code)
                    .await?
            }
            None => PreparedCall {
                body: arguments,
                ..PreparedCall::default()
            },
        };
        let mut attempt = 1;
        let response = loop {
            match self.send(&call, &context.idempotency_key).await {
                Ok(response) => break response,
                Err(SendError::Refused(refusal)) => return Err(ToolError::new(refusal)),
                Err(SendError::Unreachable(cause)) => {
                    return Err(ToolError::new(format!(
                        "the tool endpoint could not be reached: {cause}"
                    )));
                }
                Err(SendError::Lost(cause))
                    if self.resend == Some(true) && attempt < LOST_ANSWER_ATTEMPTS =>
                {
                    tracing::debug!(tool = %self.definition.name, attempt, %cause, "resending a retry-safe call");
                    attempt += 1;
                    tokio::select! {
                        () = context.cancel.cancelled() => {
                            return Err(ToolError::new("the call was cancelled"));
                        }
                        () = tokio::time::sleep(Duration::from_millis(50 << attempt)) => {}
                    }
                }
                Err(SendError::Lost(cause)) if self.resend == Some(true) => {
                    return Err(ToolError::new(format!(
                        "the tool endpoint's answer was lost {attempt} times: {cause}"
                    )));
                }
                Err(SendError::Lost(cause)) if self.resend.is_none() => {
                    return Err(ToolError::new(format!(
                        "the tool endpoint could not be reached: {cause}"
                    )));
                }
                Err(SendError::Lost(cause)) => {
                    return Err(ToolError::new(format!(
                        "the tool endpoint's answer was lost ({cause}); the call may have been \
                         applied and is not sent again, since the tool is not retry-safe"
                    )));
                }
            }
        };
        let status = response.status();
        let body = response.text().await.map_err(|e| {
            ToolError::new(format!(
                "the tool endpoint's answer broke off: {}",
                e.without_url()
            ))
        })?;
        // An endpoint that echoes what it received must not hand a secret to the model.
        let body = redacted(body, &call.redact);
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
