//! A real local HTTP receiver for webhook and notification tests: listens on 127.0.0.1, records every
//! request (method, path, headers, body) and answers with the statuses it is told to, in order.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("json body")
    }
}

pub struct Receiver {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Received>>>,
    statuses: Arc<Mutex<VecDeque<u16>>>,
}

impl Receiver {
    /// Start a receiver; `statuses` are answered in order, then 200 (with the text body `ok`).
    pub fn start(statuses: &[u16]) -> Receiver {
        Self::start_answering(statuses, "text/plain", "ok")
    }

    /// Start a receiver that answers every request with `body` of `content_type`.
    pub fn start_answering(statuses: &[u16], content_type: &str, body: &str) -> Receiver {
        let answer = Arc::new((content_type.to_string(), body.to_string()));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let statuses = Arc::new(Mutex::new(statuses.iter().copied().collect::<VecDeque<_>>()));
        let (reqs, sts) = (requests.clone(), statuses.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (reqs, sts, answer) = (reqs.clone(), sts.clone(), answer.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    while let Some(Received { method, path, headers, body }) = read_request(&mut reader) {
                        reqs.lock().unwrap().push(Received { method, path, headers, body });
                        let status = sts.lock().unwrap().pop_front().unwrap_or(200);
                        if !write_response(reader.get_ref(), status, &answer.0, &answer.1) {
                            return;
                        }
                    }
                });
            }
        });
        Receiver { url, requests, statuses }
    }

    pub fn all(&self) -> Vec<Received> {
        self.requests.lock().unwrap().clone()
    }

    /// Wait until a request matching `f` has arrived.
    pub fn wait_for(&self, timeout: Duration, f: impl Fn(&Received) -> bool) -> Option<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.all().into_iter().find(|r| f(r)) {
                return Some(r);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Answer one request on a keep-alive connection; false when the peer is gone.
pub fn write_response(mut w: impl Write, status: u16, ctype: &str, text: &str) -> bool {
    let resp = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\ncontent-type: {ctype}\r\n\r\n{text}", text.len());
    w.write_all(resp.as_bytes()).is_ok()
}

/// Read one HTTP/1.1 request (request line, headers, `Content-Length` body) from a keep-alive
/// connection; `None` when the peer closed it or sent something unreadable.
pub fn read_request(reader: &mut impl BufRead) -> Option<Received> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    let mut headers = Vec::new();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(Received { method, path, headers, body })
}
