//! The engine's spans: one `execution` span per claimed program, a `phase` span per phase and
//! a `commit` span per commit inside it; a `submit` span per submission's transaction; and, at
//! `debug`, a `claim` span per claim of the runner's loop (the `execution` spans it starts link
//! to it) and a `woke` event each time an observer is woken for new events.
//!
//! One trace per execution, whichever node runs it: every owner's `execution` span joins the
//! trace whose ID is the execution's own (its UUID's 16 bytes), under a parent span ID derived
//! from it. A Turn taken over after a crash reads as one story: generation 1 on the node that
//! died, generation 2 on the node that took over, side by side under the same root.

use openbot_schema::ExecutionId;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::store::Claim;

/// The target of the engine's spans.
pub const TARGET: &str = "openbot::engine";

/// The trace every owner of `execution` joins: its ID is the execution's UUID.
pub fn execution_trace(execution: ExecutionId) -> TraceId {
    TraceId::from_bytes(*execution.as_uuid().as_bytes())
}

/// The span ID every generation of `execution` hangs from: the UUID's random tail, which is
/// never all zeros for a v7 UUID (its variant bits are set).
pub fn execution_root(execution: ExecutionId) -> SpanId {
    let uuid = execution.as_uuid();
    let mut tail = [0u8; 8];
    tail.copy_from_slice(&uuid.as_bytes()[8..]);
    SpanId::from_bytes(tail)
}

/// The span of one claimed program: its execution, kind, generation and node. Open it with
/// [`tracing::Instrument`] around the program so every line inside carries these fields.
pub fn execution(claim: &Claim, node: &str, now_ms: i64) -> Span {
    let row = &claim.execution;
    // How long the execution waited for a claim once due: from its wake time, or from its
    // creation for a first claim; unknown for a takeover (its lease's end is not kept).
    let due = row
        .wake_at
        .or((claim.generation == 1).then_some(row.created_at));
    let claim_lag_ms = due.map(|due| (now_ms - due).max(0));
    super::metrics::claimed(
        &claim.kind,
        claim.generation,
        claim_lag_ms.map(|ms| std::time::Duration::from_millis(ms as u64)),
    );
    let span = execution_span(claim, node, claim_lag_ms);
    if span.is_disabled() {
        return span;
    }
    // The request (or loop) that claimed it, if traced: linked, not a parent, since the
    // execution outlives it and its trace is the execution's own.
    let claimed_by = Span::current().context().span().span_context().clone();
    let root = SpanContext::new(
        execution_trace(claim.id),
        execution_root(claim.id),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    // Without an exporter there is nothing to join; the error says only that.
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(root));
    if claimed_by.is_valid() {
        span.add_link(claimed_by);
    }
    span
}

/// Ends `span`'s exported span now, when the work it times returned. The `tracing` span stays
/// open while anything holds it, and the SQLite driver's worker thread enters the span of each
/// statement it runs and may leave it a moment after answering: without this, that moment
/// would stretch the exported span past its work.
pub fn end(span: &Span) {
    if !span.is_disabled() {
        span.context().span().end();
    }
}

/// The span of one submission's transaction, inside the request (or program) that submits;
/// its `execution` is recorded once created.
pub fn submit(kind: &str) -> Span {
    tracing::info_span!(target: TARGET, "submit", kind = %kind, execution = tracing::field::Empty)
}

/// The span of one claim of the runner's loop (`debug`: the loop claims whenever woken, mostly
/// nothing); `claimed` is recorded once it returns. Start the claimed programs inside it, so
/// their `execution` spans link to it.
pub fn claim() -> Span {
    tracing::debug_span!(target: TARGET, "claim", claimed = tracing::field::Empty)
}

/// Marks the moment an observer of `execution` is woken for new events (`debug`).
pub fn woke(execution: ExecutionId) {
    tracing::debug!(target: TARGET, execution = %execution, "woke");
}

/// The span of one phase of the current execution.
pub fn phase(name: &str) -> Span {
    tracing::info_span!(target: TARGET, "phase", "otel.name" = %format!("phase {name}"), phase = %name)
}

/// The span of one commit of the current execution.
pub fn commit(state: Option<&'static str>) -> Span {
    tracing::info_span!(target: TARGET, "commit", state)
}

/// The `execution` span itself: a root, so a submission's request is no parent of it.
fn execution_span(claim: &Claim, node: &str, claim_lag_ms: Option<i64>) -> Span {
    let row = &claim.execution;
    tracing::info_span!(
        target: TARGET,
        parent: None,
        "execution",
        "otel.name" = %format!("execution {}", claim.kind),
        execution = %claim.id,
        kind = %claim.kind,
        generation = claim.generation,
        node = %node,
        chat = row.chat_id.map(tracing::field::display),
        claim_lag_ms,
    )
}
