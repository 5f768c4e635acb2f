//! `connection-floor`: what one idle HTTP/1 connection that holds an open response costs a
//! server process, without OpenBot around it: the floor under `observer-memory`'s figures.
//!
//! The program runs itself as the server (`--serve <mode>`, a child process whose resident
//! memory it reads) and opens `--count` connections to it from this process over 127.0.0.1,
//! each sending a request like an SSE observer's (`Accept: text/event-stream`, a bearer token,
//! `Last-Event-ID`) and waiting for the first bytes of the answer's body; then the connections
//! stay idle. Server modes:
//!
//! - `hyper`: each connection is hyper's HTTP/1 connection in its own task, as
//!   `server/src/http/serve.rs` serves it (hyper's default builder), with a service that answers
//!   every request with a body that sends one chunk and then never another (an idle stream);
//! - `hyper-small`: the same with `max_buf_size(8192)` (hyper's smallest) and `writev(false)`;
//! - `hyper-poll`: hyper's connection whose service never answers (an idle long poll; the
//!   client does not wait for an answer, VmRSS is read once it settled);
//! - `raw`: no HTTP library: the task reads the request head into a 1 KiB buffer, drops it,
//!   writes a response head and the first chunk, and waits for the socket to close.
//!
//! It prints (VmRSS with the connections - VmRSS before) / count for the server process and
//! never asserts. Kernel socket buffers are not in VmRSS.

use std::io::{BufRead, BufReader};
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use clap::Parser;
use hyper::body::{Body, Frame};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What one idle HTTP/1 connection with an open response costs a server process.
#[derive(Debug, Parser)]
#[command(name = "connection-floor")]
struct Args {
    /// Serve in this mode (`hyper`, `hyper-small`, `hyper-poll`, `raw`) instead of measuring.
    #[arg(long)]
    serve: Option<String>,
    /// The modes to measure, one fresh server each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "hyper,hyper-small,hyper-poll,raw"
    )]
    modes: Vec<String>,
    /// Idle connections per mode.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
}

/// A body that sends one chunk, then nothing more, ever (an idle event stream).
struct IdleBody {
    sent: bool,
}

impl Body for IdleBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.sent {
            return Poll::Pending;
        }
        self.sent = true;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b": ok\n\n")))))
    }
}

async fn serve(mode: &str) -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?.port());
    let mode = mode.to_string();
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        match mode.as_str() {
            "raw" => {
                tokio::spawn(async move {
                    let mut stream = stream;
                    let mut head = vec![0u8; 1024];
                    let mut filled = 0;
                    while !head[..filled].windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut head[filled..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => filled += n,
                        }
                        if filled == head.len() {
                            return;
                        }
                    }
                    drop(head);
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\n: ok\n\n\r\n";
                    if stream.write_all(answer).await.is_err() {
                        return;
                    }
                    let mut byte = [0u8; 1];
                    let _ = stream.read(&mut byte).await;
                });
            }
            "hyper-poll" => {
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(|request| async move {
                        drop(request);
                        std::future::pending::<()>().await;
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(IdleBody {
                            sent: false,
                        }))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            "hyper" | "hyper-small" => {
                let small = mode == "hyper-small";
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(|request| async move {
                        drop(request);
                        let mut response = hyper::Response::new(IdleBody { sent: false });
                        response.headers_mut().insert(
                            hyper::header::CONTENT_TYPE,
                            hyper::header::HeaderValue::from_static("text/event-stream"),
                        );
                        Ok::<_, std::convert::Infallible>(response)
                    });
                    let mut builder = hyper::server::conn::http1::Builder::new();
                    if small {
                        builder.max_buf_size(8192).writev(false);
                    }
                    let _ = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            other => bail!("unknown mode `{other}`"),
        }
    }
}

fn rss_kb(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS")
}

async fn open(port: u16, answered: bool) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(
            b"GET /v1/executions/01a23186-f37c-70a7-b80f-6e03d3b09060/events HTTP/1.1\r\n\
              host: 127.0.0.1\r\naccept: text/event-stream\r\nlast-event-id: 3\r\n\
              authorization: Bearer obt_0123456789abcdef0123456789abcdef01234567\r\n\r\n",
        )
        .await?;
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while answered && !got.windows(4).any(|w| w == b": ok") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            bail!("the server closed a connection");
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(stream)
}

async fn measure(mode: &str, count: usize) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(["--serve", mode])
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().context("no stdout")?;
    let port: u16 = BufReader::new(stdout)
        .lines()
        .next()
        .context("no port")??
        .trim()
        .parse()?;
    let pid = child.id();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_kb(pid)?;
    let mut streams = Vec::with_capacity(count);
    let mut pending = futures::stream::FuturesUnordered::new();
    let mut started = 0;
    while streams.len() < count {
        while started < count && pending.len() < 128 {
            pending.push(open(port, mode != "hyper-poll"));
            started += 1;
        }
        use futures::StreamExt;
        match pending.next().await {
            Some(stream) => streams.push(stream?),
            None => break,
        }
    }
    // Until VmRSS settles.
    let mut last = rss_kb(pid)?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = rss_kb(pid)?;
        if now.abs_diff(last) * 500 < last {
            last = now;
            break;
        }
        last = now;
    }
    let per = (last.saturating_sub(before)) as f64 * 1024.0 / count as f64;
    println!(
        "{mode:>11} x {count}: server VmRSS {:.1} MB -> {:.1} MB: {per:.0} bytes ({:.2} KiB) per idle connection",
        before as f64 / 1024.0,
        last as f64 / 1024.0,
        per / 1024.0
    );
    drop(streams);
    let _ = child.kill();
    let _ = child.wait();
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(mode) = &args.serve {
        return serve(mode).await;
    }
    for mode in &args.modes {
        measure(mode, args.count).await?;
    }
    Ok(())
}
