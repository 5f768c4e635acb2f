//! A local HTTP endpoint standing for a tool's outside system, on plain threads (for tests
//! whatever their runtime): it answers `paid` to each request and counts them, except that it
//! never answers the first `unanswered` requests (it keeps their connections open), as a reply
//! lost on the way back.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Starts the endpoint; returns its URL and the count of requests it received.
pub fn endpoint(unanswered: usize) -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/pay", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&count);
    // Connections never answered stay open for as long as the endpoint runs.
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            read_request(&mut stream);
            let seen = counted.fetch_add(1, Ordering::SeqCst);
            if seen < unanswered {
                held.lock().unwrap().push(stream);
                continue;
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\npaid",
            );
        }
    });
    (url, count)
}

/// Reads the head and the body its Content-Length announces.
fn read_request(stream: &mut TcpStream) {
    let mut request = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buffer) {
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&request).to_string();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let length = text[..head_end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= head_end + 4 + length {
                break;
            }
        }
    }
}

/// Waits (up to 30 s) until the endpoint received `wanted` requests.
pub fn wait_for(count: &AtomicUsize, wanted: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while count.load(Ordering::SeqCst) < wanted {
        assert!(
            std::time::Instant::now() < deadline,
            "the endpoint never received {wanted} requests"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
