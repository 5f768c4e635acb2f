//! One MCP session: opened, used for discovery or calls, closed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use openbot_schema::{AppToolAnnotations, AppToolDeclaration, AppTransport, ContentPart};
use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, MetaObject, RequestMetaObject,
    ResourceContents,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{McpError, REQUEST_ID_META};
use crate::outbound::OutboundPolicy;

/// Where an MCP server is and what to send it.
#[derive(Clone)]
pub struct McpEndpoint {
    /// The transport: a streamable-HTTP URL or a stdio command.
    pub transport: AppTransport,
    /// HTTP headers for every request (credentials); unused for stdio.
    pub headers: BTreeMap<String, String>,
}

impl std::fmt::Debug for McpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are credentials: only their names are shown.
        f.debug_struct("McpEndpoint")
            .field("transport", &self.transport)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// How a session may be opened.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// The outbound policy every HTTP request keeps to.
    pub outbound: Arc<OutboundPolicy>,
    /// Whether a stdio server may be started.
    pub allow_stdio: bool,
    /// How long opening (connect and `initialize`) may take.
    pub open_timeout: Duration,
}

impl OpenOptions {
    /// Everything allowed: for a standalone agent whose servers the person running it chose.
    pub fn standalone() -> Self {
        Self {
            outbound: Arc::new(OutboundPolicy::allow_all()),
            allow_stdio: true,
            open_timeout: Duration::from_secs(30),
        }
    }
}

/// A tool call's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolResult {
    /// What the model sees: text, and images, audio and binary resources as media parts.
    pub content: Vec<ContentPart>,
    /// Whether the tool reported an error (`isError`).
    pub is_error: bool,
}

/// An open MCP session. Close it with [`McpSession::close`]; dropping it also ends the
/// session (the child process is killed, the HTTP session is left to expire).
pub struct McpSession {
    service: RunningService<RoleClient, ()>,
}

fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>, McpError> {
    let mut map = HashMap::new();
    for (name, value) in headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| McpError::Refused(format!("`{name}` is not an HTTP header name")))?;
        let mut value = reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| McpError::Refused(format!("the value of header `{name}` is not valid")))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

fn service_error(error: ServiceError) -> McpError {
    if error.is_authorization_required() {
        return McpError::Unauthorized;
    }
    match error {
        ServiceError::McpError(data) => McpError::Protocol(data.message.to_string()),
        ServiceError::TransportClosed => McpError::Lost,
        ServiceError::Cancelled { .. } => McpError::Cancelled,
        other => match refusal_in(&other) {
            Some(refusal) => McpError::Refused(refusal),
            None => McpError::Unreachable(other.to_string()),
        },
    }
}

/// The outbound policy's refusal somewhere in an error's chain (the transport keeps reqwest's
/// error as a source), if that is its cause.
fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = Some(error);
    while let Some(err) = cause {
        if let Some(refusal) = OutboundPolicy::refusal(err) {
            return Some(refusal);
        }
        let text = err.to_string();
        if let Some(at) = text.find("the outbound policy") {
            return Some(text[at..].lines().next().unwrap_or_default().to_string());
        }
        cause = err.source();
    }
    None
}

/// Why the policy refused `url`'s host, when it did: the transport's error does not keep the
/// resolver's words, so a failed open looks the name up again to tell a refusal apart.
async fn policy_refusal(policy: &OutboundPolicy, url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?.to_string();
    let port = parsed.port_or_known_default()?;
    let addresses: Vec<_> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .ok()?
        .collect();
    (!addresses.is_empty() && addresses.iter().all(|a| !policy.allows(a.ip())))
        .then(|| crate::outbound::OutboundError::NoAllowedAddress(host).to_string())
}

impl McpSession {
    /// Opens a session: starts the stdio server or connects over streamable HTTP, and runs
    /// MCP's `initialize`. Reads no capability list.
    pub async fn open(endpoint: &McpEndpoint, options: &OpenOptions) -> Result<Self, McpError> {
        let opening = async {
            match &endpoint.transport {
                AppTransport::Http { url } => {
                    options
                        .outbound
                        .check_url(url)
                        .map_err(|e| McpError::Refused(e.to_string()))?;
                    let client = options
                        .outbound
                        .client_builder()
                        .connect_timeout(Duration::from_secs(10))
                        .build()
                        .map_err(|e| McpError::Unreachable(e.to_string()))?;
                    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                        .custom_headers(header_map(&endpoint.headers)?);
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    match ().serve(transport).await {
                        Ok(service) => Ok(service),
                        Err(e) if e.is_authorization_required() => Err(McpError::Unauthorized),
                        Err(e) => Err(match refusal_in(&e) {
                            Some(refusal) => McpError::Refused(refusal),
                            None => match policy_refusal(&options.outbound, url).await {
                                Some(refusal) => McpError::Refused(refusal),
                                None => McpError::Unreachable(e.to_string()),
                            },
                        }),
                    }
                }
                AppTransport::Stdio { command, args } => {
                    if !options.allow_stdio {
                        return Err(McpError::Refused(
                            "stdio Apps are not enabled on this deployment".into(),
                        ));
                    }
                    let mut cmd = tokio::process::Command::new(command);
                    cmd.args(args).kill_on_drop(true);
                    let (transport, _stderr) = TokioChildProcess::builder(cmd)
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .map_err(|e| {
                            McpError::Unreachable(format!("`{command}` could not be started: {e}"))
                        })?;
                    ().serve(transport)
                        .await
                        .map_err(|e| McpError::Unreachable(e.to_string()))
                }
                AppTransport::Connector { .. } => Err(McpError::Refused(
                    "a Connector is reached through its Computer's link, not opened here".into(),
                )),
            }
        };
        let service = tokio::time::timeout(options.open_timeout, opening)
            .await
            .map_err(|_| McpError::Unreachable("opening the session timed out".into()))??;
        Ok(Self { service })
    }

    /// Every tool of the server, with its schemas and annotations (all pages).
    pub async fn list_tools(&self) -> Result<Vec<AppToolDeclaration>, McpError> {
        let tools = self
            .service
            .peer()
            .list_all_tools()
            .await
            .map_err(service_error)?;
        Ok(tools.into_iter().map(declaration).collect())
    }

    /// Calls one tool, as [`McpCaller::call_tool`] does.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        request_id: &str,
        cancel: &CancellationToken,
    ) -> Result<McpToolResult, McpError> {
        self.caller()
            .call_tool(name, arguments, request_id, cancel)
            .await
    }

    /// A handle that calls tools on this session while someone else holds the session to
    /// close it: a close that comes first ends the call with [`McpError::Lost`].
    pub fn caller(&self) -> McpCaller {
        McpCaller {
            peer: self.service.peer().clone(),
        }
    }

    /// Ends the session: the stdio server is stopped, the HTTP session deleted. Fails when
    /// that did not finish within 5 s or its task broke: the server may still run.
    pub async fn close(mut self) -> Result<(), McpError> {
        match self
            .service
            .close_with_timeout(Duration::from_secs(5))
            .await
        {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(McpError::Lost),
            Err(err) => Err(McpError::Protocol(format!(
                "the session's close broke: {err}"
            ))),
        }
    }
}

fn declaration(tool: rmcp::model::Tool) -> AppToolDeclaration {
    let annotations = tool
        .annotations
        .as_ref()
        .map(|a| AppToolAnnotations {
            title: a.title.clone(),
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        })
        .unwrap_or_default();
    AppToolDeclaration {
        name: tool.name.to_string(),
        title: tool.title.clone(),
        description: tool.description.as_deref().unwrap_or_default().to_string(),
        input_schema: Value::Object((*tool.input_schema).clone()),
        output_schema: tool
            .output_schema
            .as_ref()
            .map(|s| Value::Object((**s).clone())),
        annotations,
    }
}

fn tool_result(result: CallToolResult) -> McpToolResult {
    let mut content: Vec<ContentPart> = result.content.into_iter().map(part).collect();
    if content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        content.push(ContentPart::text(structured.to_string()));
    }
    McpToolResult {
        content,
        is_error: result.is_error == Some(true),
    }
}

/// One MCP content block as the model sees it: text as text; an image, audio or a binary
/// resource as a media part with its type and bytes (each provider sends what it can read); a
/// text resource as its text under its URI; a resource link as a line naming it.
fn part(block: ContentBlock) -> ContentPart {
    match block {
        ContentBlock::Text(text) => ContentPart::text(text.text),
        ContentBlock::Image(image) => ContentPart::media(image.mime_type, image.data),
        ContentBlock::Audio(audio) => ContentPart::media(audio.mime_type, audio.data),
        ContentBlock::Resource(embedded) => match embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                ContentPart::text(format!("[resource: {uri}]\n{text}"))
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => ContentPart::Media {
                media_type: mime_type.unwrap_or_else(|| "application/octet-stream".into()),
                data: blob,
                name: Some(uri),
            },
            other => ContentPart::text(serde_json::to_string(&other).unwrap_or_default()),
        },
        ContentBlock::ResourceLink(link) => {
            let media_type = link
                .mime_type
                .as_deref()
                .map(|t| format!(" ({t})"))
                .unwrap_or_default();
            let description = link
                .description
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            ContentPart::text(format!(
                "[resource link: {} {}{media_type}{description}]",
                link.name, link.uri
            ))
        }
        // A block kind this client does not know yet: its JSON, so nothing is lost.
        other => ContentPart::text(serde_json::to_string(&other).unwrap_or_default()),
    }
}

/// Calls tools on an open [`McpSession`] without holding it (see [`McpSession::caller`]).
#[derive(Clone)]
pub struct McpCaller {
    peer: rmcp::service::Peer<RoleClient>,
}

impl std::fmt::Debug for McpCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpCaller").finish_non_exhaustive()
    }
}

impl McpCaller {
    /// Calls one tool with `arguments`, sending `request_id` in `_meta` as
    /// [`REQUEST_ID_META`]. When `cancel` fires first the request is abandoned and the server
    /// is sent `notifications/cancelled` for it.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        request_id: &str,
        cancel: &CancellationToken,
    ) -> Result<McpToolResult, McpError> {
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            _ => return Err(McpError::Refused("tool arguments must be an object".into())),
        };
        let mut meta = serde_json::Map::new();
        meta.insert(
            REQUEST_ID_META.into(),
            Value::String(request_id.to_string()),
        );
        let mut params = CallToolRequestParams::new(name.to_string());
        params.arguments = arguments;
        params.meta = Some(RequestMetaObject(MetaObject(meta)));
        // Dropping the request future before its answer sends `notifications/cancelled`.
        let result = tokio::select! {
            result = self.peer.call_tool(params) => result.map_err(service_error)?,
            () = cancel.cancelled() => return Err(McpError::Cancelled),
        };
        Ok(tool_result(result))
    }
}
