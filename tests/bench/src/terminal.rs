//! `terminal`: what a Computer's terminal session costs in this process (docs/benchmarks.md,
//! "Computers"), against the same program on plain pipes in the same run:
//!
//! - round trip: write a line to `cat` and read it back; through a `LocalComputer` session
//!   (a pseudo-terminal, its numbered output log, a read by cursor that waits) and through a
//!   child process's piped stdin and stdout (the baseline);
//! - throughput: a program writes `--megabytes` MB; read to its end through a session (the
//!   bytes delivered and the chunks a slower reader lost, which a session drops beyond its
//!   newest 1 MiB) and through a pipe.
//!
//! Prints p50/p99 of the round trips, MB/s of each read, and their ratios; never asserts.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use openbot_core::computer::{Computer, ComputerOptions, LocalComputer, StartTerminal};
use tokio_util::sync::CancellationToken;

#[path = "common/micros.rs"]
mod micros;
use micros::summary;

#[derive(Debug, Parser)]
#[command(name = "terminal")]
struct Args {
    /// Measured round trips of each kind (after 50 warm-up ones).
    #[arg(long, default_value_t = 1000)]
    round_trips: usize,
    /// Megabytes the throughput program writes.
    #[arg(long, default_value_t = 64)]
    megabytes: usize,
}

/// Round trips through a session running `cat` with the terminal's echo off.
async fn session_round_trips(computer: &LocalComputer, n: usize) -> anyhow::Result<Vec<f64>> {
    let session = computer
        .start_terminal(StartTerminal {
            cwd: None,
            command: Some("stty -echo; exec cat".into()),
        })
        .await?;
    let mut cursor = 0;
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 50 {
        let line = format!("ping {i}\n");
        let started = Instant::now();
        computer.write_terminal(&session.id, &line).await?;
        let mut seen = String::new();
        while !seen.contains(&format!("ping {i}")) {
            let out = computer
                .read_terminal(
                    &session.id,
                    cursor,
                    Duration::from_secs(5),
                    CancellationToken::new(),
                )
                .await?;
            anyhow::ensure!(!out.exited, "cat ended");
            cursor = out.next_cursor;
            seen.push_str(&out.text());
        }
        if i >= 50 {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    computer.close_terminal(&session.id).await?;
    Ok(times)
}

/// Round trips through `cat` on plain pipes.
fn pipe_round_trips(n: usize) -> anyhow::Result<Vec<f64>> {
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut input = child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
    let mut output = BufReader::new(
        child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?,
    );
    let mut times = Vec::with_capacity(n);
    let mut line = String::new();
    for i in 0..n + 50 {
        let started = Instant::now();
        input.write_all(format!("ping {i}\n").as_bytes())?;
        input.flush()?;
        line.clear();
        output.read_line(&mut line)?;
        if i >= 50 {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    drop(input);
    child.wait()?;
    Ok(times)
}

fn producer(megabytes: usize) -> String {
    format!("head -c {} /dev/zero | tr '\\0' x", megabytes * 1024 * 1024)
}

/// Reads a producer's output to its end through a session: seconds, bytes delivered, chunks
/// dropped.
async fn session_throughput(
    computer: &LocalComputer,
    megabytes: usize,
) -> anyhow::Result<(f64, u64, u64)> {
    let started = Instant::now();
    let session = computer
        .start_terminal(StartTerminal {
            cwd: None,
            command: Some(producer(megabytes)),
        })
        .await?;
    let (mut cursor, mut bytes, mut dropped) = (0, 0u64, 0u64);
    loop {
        let out = computer
            .read_terminal(
                &session.id,
                cursor,
                Duration::from_secs(5),
                CancellationToken::new(),
            )
            .await?;
        cursor = out.next_cursor;
        dropped += out.dropped;
        bytes += out.chunks.iter().map(|c| c.text.len() as u64).sum::<u64>();
        if out.exited {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    computer.close_terminal(&session.id).await?;
    Ok((seconds, bytes, dropped))
}

/// Reads the same producer's output through a pipe: seconds and bytes.
fn pipe_throughput(megabytes: usize) -> anyhow::Result<(f64, u64)> {
    let started = Instant::now();
    let mut child = Command::new("sh")
        .args(["-c", &producer(megabytes)])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    loop {
        let n = stdout.read(&mut buf)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
    }
    child.wait()?;
    Ok((started.elapsed().as_secs_f64(), bytes))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let folder = tempfile::tempdir()?;
    let computer = LocalComputer::new(ComputerOptions::new([folder.path()]))?;

    let (session_p50, session_p99) =
        summary(session_round_trips(&computer, args.round_trips).await?);
    let (pipe_p50, pipe_p99) = summary(pipe_round_trips(args.round_trips)?);
    println!("round trip of a line, {} each:", args.round_trips);
    println!("  session  p50 {session_p50:8.1} µs  p99 {session_p99:8.1} µs");
    println!("  pipe     p50 {pipe_p50:8.1} µs  p99 {pipe_p99:8.1} µs");
    println!(
        "  session / pipe p50: {:.2}x (+{:.1} µs)",
        session_p50 / pipe_p50,
        session_p50 - pipe_p50
    );

    let (session_s, delivered, dropped) = session_throughput(&computer, args.megabytes).await?;
    let (pipe_s, piped) = pipe_throughput(args.megabytes)?;
    let mb = |bytes: u64, seconds: f64| bytes as f64 / (1024.0 * 1024.0) / seconds;
    let produced = (args.megabytes * 1024 * 1024) as u64;
    println!("throughput, {} MB written:", args.megabytes);
    println!(
        "  session  {:8.1} MB/s written to its end, {delivered} bytes delivered, {dropped} chunks dropped",
        mb(produced, session_s)
    );
    println!("  pipe     {:8.1} MB/s ({piped} bytes)", mb(piped, pipe_s));
    println!("  session / pipe: {:.2}x", pipe_s / session_s);
    Ok(())
}
