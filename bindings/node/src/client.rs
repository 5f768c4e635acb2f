//! The native client: the core `Client`'s one generic call path ([`NativeClient::call`], every
//! operation of the API by its `operationId`), its event streams and the wait for an
//! execution's end. Values cross as JSON in the schema's wire format; the TypeScript layer
//! (generated from schema/openapi.json) types them and builds its classes (`Client`, `Bot`,
//! `Chat`, `Turn`) on top.

use std::sync::Arc;

use futures::StreamExt;
use napi::Env;
use napi::bindgen_prelude::{Buffer, Either, PromiseRaw, Result};
use napi_derive::napi;
use openbot_core::{ApiAnswer, ApiBody, ApiRequest, Client, Error};
use openbot_schema::{ErrorCode, EventKind};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::answer::answer;
use crate::error;
use crate::stream::EventStream;

/// A connected client, in either mode.
#[napi]
pub struct NativeClient {
    inner: Arc<dyn Client>,
}

impl NativeClient {
    /// Wraps a core client.
    pub fn new(inner: Arc<dyn Client>) -> Self {
        Self { inner }
    }
}

/// What an operation answered: nothing (`{}`), a JSON document (`json`), or bytes with their
/// media type (`data`, `contentType`).
#[napi(object)]
pub struct NativeAnswer {
    /// The JSON document, for an operation that answers one.
    pub json: Option<Value>,
    /// The bytes, for an operation that answers bytes (a file's content).
    pub data: Option<Buffer>,
    /// The media type of `data`.
    pub content_type: Option<String>,
}

impl From<ApiAnswer> for NativeAnswer {
    fn from(answer: ApiAnswer) -> Self {
        let (json, data, content_type) = match answer {
            ApiAnswer::Empty => (None, None, None),
            ApiAnswer::Json(value) => (Some(value), None, None),
            ApiAnswer::Bytes(bytes) => (None, Some(bytes.data.into()), Some(bytes.content_type)),
        };
        Self {
            json,
            data,
            content_type,
        }
    }
}

/// Writes a schema value for JavaScript.
fn to_js<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| {
        error::to_js(Error::new(
            ErrorCode::RequestFailed,
            format!("a value could not be encoded: {e}"),
        ))
    })
}

/// A cursor from JavaScript: a whole number from 0.
fn cursor(after: Option<f64>) -> Result<u64> {
    match after {
        None => Ok(0),
        Some(a) if a >= 0.0 && a.fract() == 0.0 && a <= 9_007_199_254_740_991.0 => Ok(a as u64),
        Some(a) => Err(error::invalid_input(format!(
            "`after` must be a whole number from 0, not {a}"
        ))),
    }
}

/// The request of one generic call: `params` by name (an object, or nothing), and at most one
/// body (JSON, or bytes with their media type).
fn request(
    params: Option<Value>,
    body: Option<Value>,
    data: Option<Buffer>,
    content_type: Option<String>,
) -> Result<ApiRequest> {
    let params = match params {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(error::invalid_input("`params` must be an object")),
    };
    let body = match (body, data) {
        (Some(_), Some(_)) => {
            return Err(error::invalid_input(
                "a request has one body: JSON or bytes, not both",
            ));
        }
        (Some(Value::Null) | None, None) => None,
        (Some(json), None) => Some(ApiBody::Json(json)),
        (None, Some(data)) => Some(ApiBody::Bytes {
            data: data.to_vec(),
            content_type: content_type.unwrap_or_else(|| "application/octet-stream".to_string()),
        }),
    };
    Ok(ApiRequest { params, body })
}

#[napi]
impl NativeClient {
    /// Runs one operation of the API by its `operationId` (see schema/openapi.json), in both
    /// modes: path and query `params` by name, and a JSON `body` or bytes (`data`, with
    /// `contentType`). An operation only a server has fails in memory with `invalid_input`
    /// that says so; an unknown operation is `invalid_input` too.
    #[napi(ts_return_type = "NativeAnswer | Promise<NativeAnswer>")]
    pub fn call<'env>(
        &self,
        env: &'env Env,
        operation: String,
        params: Option<Value>,
        body: Option<Value>,
        data: Option<Buffer>,
        content_type: Option<String>,
    ) -> Result<Either<NativeAnswer, PromiseRaw<'env, NativeAnswer>>> {
        let inner = Arc::clone(&self.inner);
        let request = request(params, body, data, content_type)?;
        answer(env, async move {
            let answer = inner
                .call(&operation, request)
                .await
                .map_err(error::to_js)?;
            Ok(NativeAnswer::from(answer))
        })
    }

    /// The execution's events after sequence `after` (0 by default).
    #[napi(ts_return_type = "EventStream | Promise<EventStream>")]
    pub fn observe<'env>(
        &self,
        env: &'env Env,
        id_: String,
        after: Option<f64>,
    ) -> Result<Either<EventStream, PromiseRaw<'env, EventStream>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let id = id_
                .parse()
                .map_err(|_| error::invalid_input(not_an_execution(&id_)))?;
            let stream = inner
                .observe(id, cursor(after)?)
                .await
                .map_err(error::to_js)?;
            Ok(EventStream::new(stream))
        })
    }

    /// Waits for an execution's end in Rust, with no event crossing into JavaScript on the
    /// way; answers with `{ execution, last_event, text }`: the final `Execution`, its last
    /// event (`turn_ended`, `job_ended` or `failed`) and the text of its last model step (the
    /// Turn's answer; empty for work without a model).
    #[napi(
        ts_return_type = "{ execution: any, last_event: any, text: string } | Promise<{ execution: any, last_event: any, text: string }>"
    )]
    pub fn wait_execution<'env>(
        &self,
        env: &'env Env,
        id_: String,
    ) -> Result<Either<Value, PromiseRaw<'env, Value>>> {
        let inner = Arc::clone(&self.inner);
        answer(env, async move {
            let id = id_
                .parse()
                .map_err(|_| error::invalid_input(not_an_execution(&id_)))?;
            // From the start: the answer's text is in the last step's deltas.
            let mut events = inner.observe(id, 0).await.map_err(error::to_js)?;
            let mut last = None;
            let mut text = String::new();
            while let Some(event) = events.next().await {
                let event = event.map_err(error::to_js)?;
                match &event.kind {
                    // A new step or attempt starts its text afresh.
                    EventKind::ModelStepStarted { .. } => text.clear(),
                    EventKind::TextDelta { text: delta, .. } => text.push_str(delta),
                    _ => {}
                }
                last = Some(event);
            }
            let execution = inner.get_execution(id).await.map_err(error::to_js)?;
            to_js(&json!({ "execution": execution, "last_event": last, "text": text }))
        })
    }

    /// Closes the client; later calls fail with the code `closed`.
    #[napi]
    pub async fn close(&self) {
        self.inner.close().await;
    }
}

fn not_an_execution(value: &str) -> String {
    format!(
        "`{}` is not an execution ID",
        value.chars().take(64).collect::<String>()
    )
}
