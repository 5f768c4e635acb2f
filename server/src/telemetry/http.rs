//! The `request` span of every HTTP request: method, matched route, status and, for a fault,
//! the error ID its answer names. It ends with the response's head, or for an SSE stream with
//! the stream. An incoming W3C `traceparent` header makes the span a child
//! of the caller's trace (when traces are exported).

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::TraceContextExt as _;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The target of request spans.
pub const TARGET: &str = "openbot::http";

struct Headers<'a>(&'a axum::http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|key| key.as_str()).collect()
    }
}

/// Runs a request inside its span. The route is the matched template (`/v1/chats/{id}`),
/// never the path: a path holds IDs, and a query could hold anything.
pub async fn trace_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_string());
    let span = tracing::info_span!(
        target: TARGET,
        "request",
        "otel.name" = %format!("{method} {}", route.as_deref().unwrap_or("unmatched")),
        "otel.kind" = "server",
        "otel.status_code" = tracing::field::Empty,
        "http.request.method" = %method,
        "http.route" = route.as_deref(),
        "http.response.status_code" = tracing::field::Empty,
        "error.id" = tracing::field::Empty,
    );
    if !span.is_disabled() {
        let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.extract(&Headers(request.headers()))
        });
        if parent.span().span_context().is_valid() {
            // Without an exporter there is no trace to join; the error says only that.
            let _ = span.set_parent(parent);
        }
    }
    let started = std::time::Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    crate::telemetry::metrics::request_ended(
        known_method(&method),
        route.as_deref().unwrap_or("unmatched"),
        status.as_u16(),
        started.elapsed(),
    );
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    let streams = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
    if streams {
        // An SSE stream's span lasts as long as the stream, and what it does runs inside it.
        let (parts, body) = response.into_parts();
        let mut frames = body.into_data_stream();
        let body = futures::stream::poll_fn(move |cx| {
            let _inside = span.enter();
            futures::StreamExt::poll_next_unpin(&mut frames, cx)
        });
        return Response::from_parts(parts, axum::body::Body::from_stream(body));
    }
    response
}

/// The method as a metric label: a standard one, else `_OTHER` (as the HTTP semantic
/// conventions say), so that no caller, signed in or not, can make a node keep a series per
/// made-up method.
fn known_method(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "_OTHER",
    }
}

/// Names `error_id` on the current request's span: the ID a sealed fault's answer gives.
pub fn record_error_id(error_id: uuid::Uuid) {
    tracing::Span::current().record("error.id", tracing::field::display(error_id));
}
