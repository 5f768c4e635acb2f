//! Event readers at the cost of their socket: a connection whose request is an execution's
//! events (`GET /v1/executions/{id}/events`, SSE or a long poll) is read into a small buffer
//! and answered here, outside hyper, whose HTTP/1 connection holds two 8 KiB buffers for as
//! long as a response is open (`observer-memory`, docs/benchmarks.md).
//!
//! Only the framing is this file's: the request goes through the one router (its
//! authentication, rights and handler), and its answer is written as HTTP/1.1 with
//! `Content-Length` or chunked. A request this file does not fully understand (another route
//! or method, a body, an upgrade, `Expect`, a head larger than [`HEAD_LIMIT`] or not all
//! arrived yet, anything `httparse` refuses) is left unread in the socket for hyper.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::SystemTime;

use axum::body::{Body, HttpBody};
use axum::http::header::{CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, Version};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, watch};

/// The largest request head answered here; a larger one goes to hyper.
const HEAD_LIMIT: usize = 2048;
/// The most header fields of a request answered here.
const MAX_HEADERS: usize = 32;
/// The most events requests routed at once (authentication, rights, the handler's first
/// pass); the others wait holding only their parsed head. A burst of readers (10,000
/// reconnecting after a restart) then costs the node their heads, not 10,000 handlers'
/// transient state and database reads queued at once, which the allocator keeps after the
/// burst (`observer-memory`, docs/benchmarks.md).
pub(super) const ROUTED_AT_ONCE: usize = 64;

/// A parsed request head, still unread in the socket.
pub(super) struct Head {
    uri: Uri,
    headers: HeaderMap,
    /// The client asked to close after this answer.
    close: bool,
    /// The head's length in bytes.
    len: usize,
}

/// Looks at the next request on `stream` without reading it: its head when it is an events
/// request this file answers, `None` for anything else (hyper's). `Err` when the peer
/// closed or the socket failed.
pub(super) async fn peek_head(stream: &TcpStream) -> std::io::Result<Option<Head>> {
    // An idle connection waits here with no buffer.
    stream.readable().await?;
    let mut buf = vec![0u8; HEAD_LIMIT];
    let n = stream.peek(&mut buf).await?;
    if n == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(parse_head(&buf[..n]))
}

/// The head in `bytes` when it is whole and an events request without a body.
fn parse_head(bytes: &[u8]) -> Option<Head> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    let httparse::Status::Complete(len) = request.parse(bytes).ok()? else {
        return None;
    };
    if request.method != Some("GET") || request.version != Some(1) {
        return None;
    }
    let path = request.path?;
    if !is_events_path(path) {
        return None;
    }
    let mut headers = HeaderMap::with_capacity(request.headers.len());
    let mut close = false;
    for field in request.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(field.value).ok()?;
        if name == CONTENT_LENGTH {
            if value.as_bytes() != b"0" {
                return None;
            }
        } else if name == TRANSFER_ENCODING
            || name == axum::http::header::EXPECT
            || name == axum::http::header::UPGRADE
        {
            return None;
        } else if name == CONNECTION {
            let value = value.to_str().ok()?;
            close |= value
                .split(',')
                .any(|token| token.trim().eq_ignore_ascii_case("close"));
        }
        headers.append(name, value);
    }
    Some(Head {
        uri: path.parse().ok()?,
        headers,
        close,
        len,
    })
}

/// `/v1/executions/{id}/events`, with or without a query.
fn is_events_path(path: &str) -> bool {
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    path.strip_prefix("/v1/executions/")
        .and_then(|rest| rest.strip_suffix("/events"))
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// Reads `head` from `stream`, answers it through `router` and writes the answer; returns
/// whether the connection stays open for another request.
/// At most [`ROUTED_AT_ONCE`] requests are routed at once across the node (`routing`).
pub(super) async fn answer(
    stream: &mut TcpStream,
    head: Head,
    router: &axum::Router,
    routing: &Semaphore,
    stopped: &mut watch::Receiver<bool>,
) -> std::io::Result<bool> {
    let close = head.close;
    // Boxed: the request's futures (the router's, the handler's) are freed once it answered,
    // and an open stream keeps only what `BodyWriter` holds.
    let Some(mut response) = Box::pin(route(stream, head, router, routing)).await? else {
        return Ok(false);
    };
    if let Some(later) = take_deferred(&mut response) {
        drop(response);
        response = match until_peer_gone(stream, later).await {
            Some(response) => response,
            None => return Ok(false),
        };
    }
    let answered = Box::pin(write_head(stream, response, close)).await?;
    if answered.bodiless {
        return Ok(!answered.close);
    }
    let writer = BodyWriter {
        stream,
        body: answered.body,
        chunked: answered.chunked,
        out: Vec::new(),
        written: 0,
        ended: false,
        closing: answered.close,
        peer_sent: false,
        stop: Box::pin(stopping(stopped)),
    };
    writer.await
}

/// An answer whose head was written.
struct Answered {
    body: Body,
    chunked: bool,
    bodiless: bool,
    close: bool,
}

/// Marks a request this file answers: its handler may answer with [`deferred`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deferrable;

/// Whether the request is answered here, so that its handler may wait outside itself.
pub(crate) struct CanDefer(pub(crate) bool);

impl<S: Sync> axum::extract::FromRequestParts<S> for CanDefer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(parts.extensions.get::<Deferrable>().is_some()))
    }
}

type Later = Pin<Box<dyn Future<Output = axum::response::Response> + Send>>;

/// An answer that is still to come, carried out of the handler in its response.
#[derive(Clone)]
struct Deferred(std::sync::Arc<std::sync::Mutex<Option<Later>>>);

/// A response that tells this file to wait for `answer` outside the handler (whose future,
/// with its extractors, is then freed): for a long poll, the connection waits with only what
/// `answer` holds. Only for a request whose [`CanDefer`] is true.
pub(crate) fn deferred(
    answer: impl Future<Output = axum::response::Response> + Send + 'static,
) -> axum::response::Response {
    let mut response = axum::response::Response::new(Body::empty());
    response
        .extensions_mut()
        .insert(Deferred(std::sync::Arc::new(std::sync::Mutex::new(Some(
            Box::pin(answer),
        )))));
    response
}

/// The answer still to come that `response` carries, if it is [`deferred`].
fn take_deferred(response: &mut axum::response::Response) -> Option<Later> {
    response
        .extensions_mut()
        .remove::<Deferred>()
        .and_then(|d| {
            d.0.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
        })
}

/// Awaits `answer` while the reader is there; `None` when it went away first.
async fn until_peer_gone<T>(stream: &TcpStream, answer: impl Future<Output = T>) -> Option<T> {
    let mut answer = std::pin::pin!(answer);
    let mut peer_sent = false;
    loop {
        tokio::select! {
            answered = &mut answer => return Some(answered),
            gone = peer_gone(stream), if !peer_sent => {
                if gone {
                    return None;
                }
                // The next request is pipelined behind this one: it waits its turn.
                peer_sent = true;
            }
        }
    }
}

/// Reads the head and runs the router once `routing` has room; `None` when the reader went
/// away first.
async fn route(
    stream: &mut TcpStream,
    head: Head,
    router: &axum::Router,
    routing: &Semaphore,
) -> std::io::Result<Option<axum::response::Response>> {
    // The semaphore is never closed; a closed one would only mean no limit.
    let _routing = match until_peer_gone(stream, routing.acquire()).await {
        Some(permit) => permit.ok(),
        None => return Ok(None),
    };
    let mut consumed = vec![0u8; head.len];
    stream.read_exact(&mut consumed).await?;
    drop(consumed);
    tracing::debug!(
        path = head.uri.path(),
        "an events request answered outside hyper"
    );
    let mut request = Request::new(Body::empty());
    *request.method_mut() = Method::GET;
    *request.uri_mut() = head.uri;
    *request.version_mut() = Version::HTTP_11;
    *request.headers_mut() = head.headers;
    request.extensions_mut().insert(Deferrable);
    let service = hyper_util::service::TowerToHyperService::new(router.clone());
    let call = hyper::service::Service::call(&service, request);
    Ok(until_peer_gone(stream, call)
        .await
        .map(|answered| match answered {
            Ok(response) => response,
            Err(never) => match never {},
        }))
}

/// Writes the head of `response`.
async fn write_head(
    stream: &mut TcpStream,
    response: axum::response::Response,
    close: bool,
) -> std::io::Result<Answered> {
    let (parts, body) = response.into_parts();
    let close = close || parts.headers.get(CONNECTION).is_some_and(|v| v == "close");
    let bodiless = parts.status.is_informational()
        || parts.status == StatusCode::NO_CONTENT
        || parts.status == StatusCode::NOT_MODIFIED;
    let exact = body.size_hint().exact();
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(parts.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(
        parts
            .status
            .canonical_reason()
            .unwrap_or("Unknown")
            .as_bytes(),
    );
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
            continue;
        }
        field(&mut out, name.as_str(), value.as_bytes());
    }
    if !parts.headers.contains_key(DATE) {
        field(
            &mut out,
            "date",
            httpdate::fmt_http_date(SystemTime::now()).as_bytes(),
        );
    }
    match exact {
        _ if bodiless => {}
        Some(len) => field(&mut out, "content-length", len.to_string().as_bytes()),
        None => field(&mut out, "transfer-encoding", b"chunked"),
    }
    if close {
        field(&mut out, "connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
    stream.write_all(&out).await?;
    Ok(Answered {
        body,
        chunked: !bodiless && exact.is_none(),
        bodiless,
        close,
    })
}

/// Writes a body as it comes, holding nothing between frames but the socket, the body and an
/// empty buffer; ends when the body ends (`Ok(true)`: the connection may serve another
/// request), when the reader goes away, or at the node's shutdown (the body is ended there).
struct BodyWriter<'a> {
    stream: &'a mut TcpStream,
    body: Body,
    chunked: bool,
    /// Bytes to write, from `written` on.
    out: Vec<u8>,
    written: usize,
    /// The body ended: what is in `out` is the last of it.
    ended: bool,
    /// Close once the body ended.
    closing: bool,
    /// The reader sent bytes (its next request): no longer watched for closing.
    peer_sent: bool,
    stop: Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
}

impl Future for BodyWriter<'_> {
    type Output = std::io::Result<bool>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            while this.written < this.out.len() {
                match Pin::new(&mut *this.stream).poll_write(cx, &this.out[this.written..]) {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                    }
                    Poll::Ready(Ok(n)) => this.written += n,
                    Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            this.written = 0;
            this.out.clear();
            // An idle stream keeps no buffer.
            this.out.shrink_to(0);
            if this.ended {
                return Poll::Ready(Ok(!this.closing));
            }
            if this.stop.as_mut().poll(cx).is_ready() {
                this.end();
                this.closing = true;
                continue;
            }
            if !this.peer_sent {
                let mut byte = [0u8; 1];
                let mut peeked = ReadBuf::new(&mut byte);
                match this.stream.poll_peek(cx, &mut peeked) {
                    Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Ok(false)),
                    // The next request is pipelined behind this answer: it waits its turn.
                    Poll::Ready(Ok(_)) => this.peer_sent = true,
                    Poll::Pending => {}
                }
            }
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.end(),
                Poll::Ready(Some(Err(_))) => return Poll::Ready(Ok(false)),
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers are not sent.
                    if let Ok(data) = frame.into_data() {
                        this.push(&data);
                    }
                }
            }
        }
    }
}

impl BodyWriter<'_> {
    fn push(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.chunked {
            self.out
                .extend_from_slice(format!("{:X}\r\n", data.len()).as_bytes());
            self.out.extend_from_slice(data);
            self.out.extend_from_slice(b"\r\n");
        } else {
            self.out.extend_from_slice(data);
        }
    }

    fn end(&mut self) {
        if self.chunked {
            self.out.extend_from_slice(b"0\r\n\r\n");
        }
        self.ended = true;
    }
}

/// Resolves when the node shuts down (holding no borrow of the flag, which is not `Send`).
pub(super) async fn stopping(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

fn field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Resolves when the peer closed its end (`true`) or sent bytes (`false`).
async fn peer_gone(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.peek(&mut byte).await {
        Ok(0) | Err(_) => true,
        Ok(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_request_without_a_body_is_answered_here() {
        let head = parse_head(
            b"GET /v1/executions/abc/events?after=3 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n",
        )
        .expect("an events request");
        assert_eq!(head.uri.path(), "/v1/executions/abc/events");
        assert_eq!(head.uri.query(), Some("after=3"));
        assert_eq!(head.headers.len(), 2);
        assert!(!head.close);
    }

    #[test]
    fn connection_close_is_kept() {
        let head = parse_head(
            b"GET /v1/executions/abc/events HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n",
        )
        .expect("an events request");
        assert!(head.close);
    }

    #[test]
    fn other_requests_are_left_to_hyper() {
        for request in [
            &b"GET /v1/executions/abc HTTP/1.1\r\n\r\n"[..],
            b"GET /v1/executions/a/b/events HTTP/1.1\r\n\r\n",
            b"GET /v1/executions//events HTTP/1.1\r\n\r\n",
            b"POST /v1/executions/abc/events HTTP/1.1\r\n\r\n",
            b"GET /v1/executions/abc/events HTTP/1.0\r\n\r\n",
            b"GET /v1/executions/abc/events HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
            b"GET /v1/executions/abc/events HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET /v1/executions/abc/events HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            b"GET /v1/executions/abc/events HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            // Not all of the head has arrived.
            b"GET /v1/executions/abc/events HTTP/1.1\r\nAccept: text/event",
            b"\x00\x01garbage\r\n\r\n",
        ] {
            assert!(
                parse_head(request).is_none(),
                "{}",
                String::from_utf8_lossy(request)
            );
        }
    }

    #[test]
    fn a_head_with_too_many_fields_is_left_to_hyper() {
        let mut request = b"GET /v1/executions/abc/events HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            request.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        request.extend_from_slice(b"\r\n");
        assert!(parse_head(&request).is_none());
    }
}
