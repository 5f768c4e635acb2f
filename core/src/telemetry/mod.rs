//! The spans of the agent loop, named and shaped by the OpenTelemetry GenAI semantic
//! conventions: `invoke_agent {name}` around a Turn, `chat {model}` around each model request,
//! `execute_tool {name}` around each tool call. They are plain `tracing` spans, so the same
//! loop emits the same spans in `memory://` and on a server; a subscriber decides where they
//! go (logs, an OTLP exporter). What a host counts (the server's metrics) it learns through an
//! [`Observer`], called whether or not any span is enabled.
//!
//! What they carry is metadata: names, IDs, models, token counts, finish reasons. Message
//! text and tool arguments are recorded only when [`set_capture_content`] turned capture on
//! (the operator's opt-in, `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`). Secrets
//! never reach them: the model sees Vault references, never what they open to, and the spans
//! see no more than the model.

pub mod export;

use std::sync::atomic::{AtomicBool, Ordering};

use openbot_schema::{ToolCall, ToolResult};
use tracing::Span;

use crate::model::{ModelResponse, StopReason};

/// The target of every GenAI span, for filters.
pub const TARGET: &str = "openbot::genai";

/// One model request as the loop reports it to an [`Observer`].
#[derive(Debug, Clone, Copy)]
pub struct ModelCall<'a> {
    /// The provider (`openai`, `anthropic`, `scripted`, ...).
    pub provider: &'a str,
    /// The model asked for.
    pub model: &'a str,
    /// What the provider reported, if it answered with usage.
    pub usage: Option<openbot_schema::Usage>,
    /// From the request's start to its whole answer (or its failure).
    pub took: std::time::Duration,
}

/// What a host process counts of the agent loop (the server's Prometheus metrics). Called
/// where the thing happens, whether or not any span is enabled.
pub trait Observer: Send + Sync {
    /// A model request ended (answered or failed).
    fn model_call(&self, call: &ModelCall<'_>);
    /// The outbound policy refused a request.
    fn outbound_refused(&self);
}

static OBSERVER: std::sync::OnceLock<Box<dyn Observer>> = std::sync::OnceLock::new();

/// Installs the process's observer; the first one installed stays.
pub fn set_observer(observer: Box<dyn Observer>) {
    let _ = OBSERVER.set(observer);
}

/// The installed observer, if any.
pub(crate) fn observer() -> Option<&'static dyn Observer> {
    OBSERVER.get().map(|observer| observer.as_ref())
}

/// The `tracing` name of the span around a Turn (its OpenTelemetry name is in `otel.name`).
pub const INVOKE_AGENT: &str = "invoke_agent";
/// The `tracing` name of the span around one model request.
pub const CHAT: &str = "chat";
/// The `tracing` name of the span around one tool call.
pub const EXECUTE_TOOL: &str = "execute_tool";

static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Turns recording of message text and tool arguments on spans on or off (off by default).
pub fn set_capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether spans record message text and tool arguments.
pub fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// The W3C trace context headers (`traceparent`, `tracestate`) of the current span, when it
/// is in an exported trace: what the remote client sends, so a server's spans join the
/// caller's trace. Empty when nothing is exported.
pub fn trace_headers() -> Vec<(String, String)> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let cx = Span::current().context();
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut headers = std::collections::HashMap::new();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&cx, &mut headers);
    });
    headers.into_iter().collect()
}

/// Who a Turn runs for, as its `invoke_agent` span names it.
#[derive(Debug, Clone, Default)]
pub struct AgentLabel {
    /// The Bot's ID (`gen_ai.agent.id`).
    pub id: Option<String>,
    /// The Bot's name (`gen_ai.agent.name`).
    pub name: Option<String>,
    /// The Chat's ID (`gen_ai.conversation.id`).
    pub conversation: Option<String>,
}

/// The span around one Turn. Instrument the Turn's future with it.
pub fn invoke_agent(agent: &AgentLabel) -> Span {
    let otel_name = match &agent.name {
        Some(name) => format!("invoke_agent {name}"),
        None => "invoke_agent".to_string(),
    };
    tracing::info_span!(
        target: TARGET,
        INVOKE_AGENT,
        "otel.name" = %otel_name,
        "otel.kind" = "internal",
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.id" = agent.id.as_deref(),
        "gen_ai.agent.name" = agent.name.as_deref(),
        "gen_ai.conversation.id" = agent.conversation.as_deref(),
    )
}

/// The provider and model of a model named `provider:model`.
pub fn provider_and_model(name: &str) -> (&str, &str) {
    name.split_once(':').unwrap_or(("openbot", name))
}

/// The span around one model request (attempt) of `model` (`provider:model`) at `step`.
pub fn chat(model: &str, step: u32, attempt: u32) -> Span {
    let (provider, request_model) = provider_and_model(model);
    tracing::info_span!(
        target: TARGET,
        CHAT,
        "otel.name" = %format!("chat {request_model}"),
        "otel.kind" = "client",
        "otel.status_code" = tracing::field::Empty,
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = provider,
        "gen_ai.request.model" = request_model,
        "gen_ai.response.model" = tracing::field::Empty,
        "gen_ai.usage.input_tokens" = tracing::field::Empty,
        "gen_ai.usage.output_tokens" = tracing::field::Empty,
        "gen_ai.response.finish_reasons" = tracing::field::Empty,
        "gen_ai.output.messages" = tracing::field::Empty,
        "openbot.cost_micros" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        "openbot.step" = step,
        "openbot.attempt" = attempt,
    )
}

/// Records a model's whole answer on its `chat` span.
pub fn record_response(span: &Span, model: &str, response: &ModelResponse) {
    if span.is_disabled() {
        return;
    }
    let (_, response_model) = provider_and_model(model);
    span.record("gen_ai.response.model", response_model);
    if let Some(usage) = response.usage {
        span.record("gen_ai.usage.input_tokens", usage.input_tokens);
        span.record("gen_ai.usage.output_tokens", usage.output_tokens);
        if let Some(micros) = usage.cost_micros {
            span.record("openbot.cost_micros", micros);
        }
    }
    if let Some(stop) = response.stop {
        let reason = match stop {
            StopReason::EndTurn => "stop",
            StopReason::ToolUse => "tool_calls",
            StopReason::MaxTokens => "length",
            StopReason::Other => "other",
        };
        // A list of one, as the convention's string array, in its JSON form.
        span.record(
            "gen_ai.response.finish_reasons",
            format!("[\"{reason}\"]").as_str(),
        );
    }
    if capture_content() {
        let output = serde_json::json!([{
            "role": "assistant",
            "parts": [{"type": "text", "content": response.text}],
        }]);
        span.record("gen_ai.output.messages", output.to_string().as_str());
    }
}

/// Records a failed model request (its error's kind, never its text) on its `chat` span.
pub fn record_error(span: &Span, kind: &'static str) {
    if span.is_disabled() {
        return;
    }
    span.record("otel.status_code", "ERROR");
    span.record("error.type", kind);
}

/// The span around one tool call.
pub fn execute_tool(call: &ToolCall, step: u32, kind: &'static str) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        EXECUTE_TOOL,
        "otel.name" = %format!("execute_tool {}", call.name),
        "otel.kind" = "internal",
        "otel.status_code" = tracing::field::Empty,
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = %call.name,
        "gen_ai.tool.call.id" = %call.id,
        "gen_ai.tool.type" = kind,
        "gen_ai.tool.call.arguments" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        "openbot.step" = step,
    );
    if capture_content() {
        span.record(
            "gen_ai.tool.call.arguments",
            call.arguments.to_string().as_str(),
        );
    }
    span
}

/// Records how a tool call ended on its `execute_tool` span.
pub fn record_tool_result(span: &Span, result: &ToolResult) {
    if span.is_disabled() {
        return;
    }
    if result.is_error {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", "tool_error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_name_splits_into_provider_and_model() {
        assert_eq!(
            provider_and_model("openai:gpt-4o-mini"),
            ("openai", "gpt-4o-mini")
        );
        assert_eq!(provider_and_model("scripted"), ("openbot", "scripted"));
    }
}
