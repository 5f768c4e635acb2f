//! The one generic call path of the API: an operation by its OpenAPI `operationId`, its
//! parameters and body in, its answer out. The operation table and the typed methods over it
//! are generated from schema/openapi.json (`operations.rs`); the remote Client answers every
//! operation from the table, the in-memory Client the ones that make sense in one process
//! (`dispatch`), and the language bindings call [`Client::call`](super::Client::call) for every
//! operation they do not wrap by hand. So adding an operation to the server costs no code in a
//! client: `scripts/generate-sdk` writes its methods.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::Error;
use openbot_schema::ErrorCode;

/// What an operation's request carries as its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    None,
    /// A JSON document.
    Json,
    /// Bytes of any media type (a file's content).
    Bytes,
}

/// What an operation answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// Nothing (202, 204).
    Empty,
    /// A JSON document.
    Json,
    /// Bytes with their media type.
    Bytes,
}

/// One operation of the HTTP API.
#[derive(Debug, Clone, Copy)]
pub struct Operation {
    /// Its `operationId`, the name every SDK derives its method name from.
    pub id: &'static str,
    /// The HTTP method, upper case.
    pub method: &'static str,
    /// The path template, `{name}` for each path parameter.
    pub path: &'static str,
    /// The path parameters, in the template's order.
    pub path_params: &'static [&'static str],
    /// The query parameters.
    pub query_params: &'static [&'static str],
    /// Its body.
    pub body: BodyKind,
    /// Its answer.
    pub answer: AnswerKind,
    /// Whether it needs no token.
    pub public: bool,
    /// The [`Client`](super::Client) method that declares it by hand, if one does.
    pub client_method: Option<&'static str>,
    /// Whether the in-memory Client answers it (a hand-declared operation, or one of what
    /// makes sense in one process: HTTP and delegate tools, files); otherwise it needs a
    /// server. Declared once, in scripts/sdkgen/spec.py.
    pub memory: bool,
}

impl Operation {
    /// Whether the same request sent twice has the effect of one, so that a request whose
    /// answer was lost may be sent again: reads, and `PUT`s (they set a whole value).
    pub fn retry_safe(&self) -> bool {
        matches!(self.method, "GET" | "PUT")
    }
}

/// The operation named `id`, if the API has it.
pub fn operation(id: &str) -> Option<&'static Operation> {
    super::operations::OPERATIONS.iter().find(|op| op.id == id)
}

/// A request's body.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiBody {
    /// A JSON document.
    Json(Value),
    /// Bytes and their media type.
    Bytes {
        /// The bytes.
        data: Vec<u8>,
        /// Their media type, e.g. `text/plain`.
        content_type: String,
    },
}

/// The parameters (path and query, by name) and the body of one operation's request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiRequest {
    /// Path and query parameters by name; `null` means left out.
    pub params: Map<String, Value>,
    /// The body, for an operation that takes one.
    pub body: Option<ApiBody>,
}

impl ApiRequest {
    /// Sets a parameter; `None` leaves it out.
    pub fn param(&mut self, name: &str, value: impl Serialize) {
        if let Ok(value) = serde_json::to_value(value)
            && !value.is_null()
        {
            self.params.insert(name.to_string(), value);
        }
    }

    /// Sets a JSON body.
    pub fn json(&mut self, body: &impl Serialize) -> Result<(), Error> {
        let body = serde_json::to_value(body)
            .map_err(|e| Error::invalid_input(format!("the request cannot be encoded: {e}")))?;
        self.body = Some(ApiBody::Json(body));
        Ok(())
    }

    /// Sets a body of bytes.
    pub fn bytes(&mut self, data: Vec<u8>, content_type: &str) {
        self.body = Some(ApiBody::Bytes {
            data,
            content_type: content_type.to_string(),
        });
    }

    /// A parameter as text (a path segment, an ID), or `invalid_input` naming it.
    pub fn text(&self, op: &str, name: &str) -> Result<String, Error> {
        match self.params.get(name) {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            Some(Value::Bool(b)) => Ok(b.to_string()),
            Some(_) => Err(Error::invalid_input(format!(
                "`{name}` of {op} must be text"
            ))),
            None => Err(Error::invalid_input(format!("{op} needs `{name}`"))),
        }
    }

    /// A parameter decoded as `T`, `None` when it is left out.
    pub fn decoded<T: DeserializeOwned>(&self, op: &str, name: &str) -> Result<Option<T>, Error> {
        self.params
            .get(name)
            .map(|value| {
                serde_json::from_value(value.clone())
                    .map_err(|e| Error::invalid_input(format!("invalid `{name}` of {op}: {e}")))
            })
            .transpose()
    }

    /// The JSON body decoded as `T`.
    pub fn body_as<T: DeserializeOwned>(&self, op: &str) -> Result<T, Error> {
        match &self.body {
            Some(ApiBody::Json(value)) => serde_json::from_value(value.clone())
                .map_err(|e| Error::invalid_input(format!("invalid body of {op}: {e}"))),
            Some(ApiBody::Bytes { .. }) => Err(Error::invalid_input(format!(
                "{op} takes a JSON body, not bytes"
            ))),
            None => Err(Error::invalid_input(format!("{op} needs a body"))),
        }
    }
}

/// Bytes an operation answered, with their media type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiBytes {
    /// The bytes.
    pub data: Vec<u8>,
    /// Their media type.
    pub content_type: String,
}

/// What an operation answered.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiAnswer {
    /// Nothing.
    Empty,
    /// A JSON document.
    Json(Value),
    /// Bytes.
    Bytes(ApiBytes),
}

impl ApiAnswer {
    /// The answer encoded from a typed value.
    pub fn of(value: &impl Serialize) -> Result<Self, Error> {
        serde_json::to_value(value)
            .map(ApiAnswer::Json)
            .map_err(|e| {
                Error::new(
                    ErrorCode::RequestFailed,
                    format!("an answer could not be encoded: {e}"),
                )
            })
    }

    /// The JSON answer decoded as `T`.
    pub fn decode<T: DeserializeOwned>(self) -> Result<T, Error> {
        let value = match self {
            ApiAnswer::Json(value) => value,
            ApiAnswer::Empty => Value::Null,
            ApiAnswer::Bytes(_) => {
                return Err(Error::new(
                    ErrorCode::Unavailable,
                    "the server answered bytes where JSON was expected",
                ));
            }
        };
        serde_json::from_value(value).map_err(|e| {
            Error::new(
                ErrorCode::Unavailable,
                format!("the answer is not what this client reads: {e}"),
            )
        })
    }

    /// The answer's bytes.
    pub fn into_bytes(self) -> Result<ApiBytes, Error> {
        match self {
            ApiAnswer::Bytes(bytes) => Ok(bytes),
            _ => Err(Error::new(
                ErrorCode::Unavailable,
                "the server answered JSON where bytes were expected",
            )),
        }
    }
}

/// The error for an operation the API does not have.
pub fn unknown_operation(id: &str) -> Error {
    Error::invalid_input(format!(
        "`{}` is not an operation of the API (see schema/openapi.json)",
        id.chars().take(64).collect::<String>()
    ))
}

/// The error for an operation only a server has, asked of the in-memory Client.
pub fn server_only(id: &str) -> Error {
    Error::invalid_input(format!(
        "{id} needs an OpenBot server: connect to http://host:port (memory:// has no such thing)"
    ))
}

/// Fills a path template with its parameters, each one percent-encoded as a path segment.
pub fn fill_path(op: &Operation, request: &ApiRequest) -> Result<String, Error> {
    let mut path = op.path.to_string();
    for name in op.path_params {
        let value = request.text(op.id, name)?;
        path = path.replace(&format!("{{{name}}}"), &encode_segment(&value));
    }
    let mut query = Vec::new();
    for name in op.query_params {
        if request.params.contains_key(*name) {
            let value = request.text(op.id, name)?;
            query.push(format!(
                "{}={}",
                encode_segment(name),
                encode_segment(&value)
            ));
        }
    }
    for name in request.params.keys() {
        if !op.path_params.contains(&name.as_str()) && !op.query_params.contains(&name.as_str()) {
            return Err(Error::invalid_input(format!(
                "{} has no parameter `{}`",
                op.id,
                name.chars().take(64).collect::<String>()
            )));
        }
    }
    if !query.is_empty() {
        path.push('?');
        path.push_str(&query.join("&"));
    }
    Ok(path)
}

/// Percent-encodes everything but the unreserved characters of RFC 3986.
fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_filled_with_encoded_segments_and_its_query() {
        let op = operation("put_delegate").expect("the API has put_delegate");
        let mut request = ApiRequest::default();
        request.param("name", "a b/c");
        assert_eq!(fill_path(op, &request).unwrap(), "/v1/delegates/a%20b%2Fc");
    }

    #[test]
    fn a_parameter_the_operation_lacks_is_invalid_input() {
        let op = operation("list_bots").expect("the API has list_bots");
        let mut request = ApiRequest::default();
        request.param("colour", "red");
        let err = fill_path(op, &request).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput);
    }

    #[test]
    fn a_missing_path_parameter_is_invalid_input() {
        let op = operation("get_bot").expect("the API has get_bot");
        let err = fill_path(op, &ApiRequest::default()).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput);
        assert!(err.message.contains("`id`"), "{}", err.message);
    }
}
