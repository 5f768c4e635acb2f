//! An OTLP/HTTP trace receiver on 127.0.0.1: it decodes each `POST /v1/traces` with the
//! official protobuf types (`opentelemetry-proto`) and keeps the spans with their resource.
#![allow(dead_code)]
// Test support (also the `turn-latency` benchmark's receiver): a failed unwrap is a failed run.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;

/// One received span, its attributes flattened to text.
#[derive(Debug, Clone)]
pub struct Received {
    /// The resource's attributes (`service.name`, `service.instance.id`, ...).
    pub resource: HashMap<String, String>,
    pub name: String,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    pub parent_span_id: Vec<u8>,
    pub attributes: HashMap<String, String>,
    /// The trace IDs of its links.
    pub links: Vec<Vec<u8>>,
    /// The span IDs of its links.
    pub linked_spans: Vec<Vec<u8>>,
    /// 1 internal, 2 server, 3 client.
    pub kind: i32,
    /// Wall-clock start and end, ns since the Unix epoch.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Its events (a log line inside it): name, time (ns since the epoch), attributes.
    pub events: Vec<(String, u64, HashMap<String, String>)>,
}

impl Received {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The receiver: its base URL (for `OTEL_EXPORTER_OTLP_ENDPOINT`) and what it received.
pub struct Receiver {
    pub base: String,
    spans: Arc<Mutex<Vec<Received>>>,
    /// Every request body as received, to scan for what must never be exported.
    raw: Arc<Mutex<Vec<Vec<u8>>>>,
}

fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn flatten(attributes: &[KeyValue]) -> HashMap<String, String> {
    attributes
        .iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

impl Receiver {
    /// Starts the receiver on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let spans: Arc<Mutex<Vec<Received>>> = Arc::default();
        let raw: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let (kept, kept_raw) = (Arc::clone(&spans), Arc::clone(&raw));
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = Arc::clone(&kept);
                let kept_raw = Arc::clone(&kept_raw);
                async move {
                    kept_raw.lock().unwrap().push(body.to_vec());
                    let request = ExportTraceServiceRequest::decode(body.as_ref())
                        .expect("an OTLP/HTTP body decodes as ExportTraceServiceRequest");
                    let mut kept = kept.lock().unwrap();
                    for resource_spans in request.resource_spans {
                        let resource = resource_spans
                            .resource
                            .map(|r| flatten(&r.attributes))
                            .unwrap_or_default();
                        for scope in resource_spans.scope_spans {
                            for span in scope.spans {
                                kept.push(Received {
                                    resource: resource.clone(),
                                    name: span.name,
                                    trace_id: span.trace_id,
                                    span_id: span.span_id,
                                    parent_span_id: span.parent_span_id,
                                    attributes: flatten(&span.attributes),
                                    links: span.links.iter().map(|l| l.trace_id.clone()).collect(),
                                    linked_spans: span
                                        .links
                                        .into_iter()
                                        .map(|l| l.span_id)
                                        .collect(),
                                    kind: span.kind,
                                    start_ns: span.start_time_unix_nano,
                                    end_ns: span.end_time_unix_nano,
                                    events: span
                                        .events
                                        .into_iter()
                                        .map(|e| (e.name, e.time_unix_nano, flatten(&e.attributes)))
                                        .collect(),
                                });
                            }
                        }
                    }
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
                        ExportTraceServiceResponse::default().encode_to_vec(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base, spans, raw }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.spans.lock().unwrap().clone()
    }

    /// Every request body received so far, concatenated.
    pub fn raw(&self) -> Vec<u8> {
        self.raw.lock().unwrap().concat()
    }

    /// Waits (up to 30 s) until `done` holds for the spans received.
    pub async fn wait_for(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "never received {what}; got: {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
