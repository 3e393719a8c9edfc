//! Chat clients for tests: register users and talk to `/ws` with real websocket connections
//! (tungstenite), reading Owncast's `\n`-batched event frames.
#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use super::Api;

pub type Ws = WebSocket<MaybeTlsStream<TcpStream>>;

pub struct Chatter {
    pub id: String,
    pub token: String,
    pub ws: Ws,
}

pub fn register(s: &impl Api, name: Option<&str>) -> (String, String, Value) {
    let body = match name {
        Some(n) => json!({ "displayName": n }),
        None => json!({}),
    };
    let r = s.post_json("/api/chat/register", &body);
    assert!(r.status().is_success(), "register: {}", r.status());
    let v: Value = r.json().unwrap();
    (v["id"].as_str().unwrap().to_string(), v["accessToken"].as_str().unwrap().to_string(), v)
}

/// `register` from the client address `from` (a loopback address such as 127.0.0.7: tests with many
/// clients spread them over addresses as real viewers are, within castd's per-address limits).
pub fn register_from(s: &impl Api, name: Option<&str>, from: IpAddr) -> (String, String, Value) {
    let body = match name {
        Some(n) => json!({ "displayName": n }),
        None => json!({}),
    };
    let client = reqwest::blocking::Client::builder().local_address(from).timeout(Duration::from_secs(30)).build();
    let r = client.expect("client").post(s.url("/api/chat/register")).json(&body).send().expect("register");
    assert!(r.status().is_success(), "register from {from}: {}", r.status());
    let v: Value = r.json().unwrap();
    (v["id"].as_str().unwrap().to_string(), v["accessToken"].as_str().unwrap().to_string(), v)
}

/// A TCP connection to `to` from the address `from`.
pub fn tcp_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let sock = if from.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        sock.bind(SocketAddr::new(from, 0))?;
        let std = sock.connect(to).await?.into_std()?;
        std.set_nonblocking(false)?;
        Ok(std)
    })
}

/// `connect_raw` to the node on `port`, from the address `from`.
pub fn connect_raw_from(port: u16, token: &str, from: IpAddr) -> Ws {
    let tcp = tcp_from(from, SocketAddr::from(([127, 0, 0, 1], port))).expect("tcp connect");
    let url = format!("ws://127.0.0.1:{port}/ws?accessToken={token}");
    let (ws, _) = tungstenite::client(url, MaybeTlsStream::Plain(tcp)).expect("websocket connect");
    if let MaybeTlsStream::Plain(t) = ws.get_ref() {
        t.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    }
    ws
}

pub fn connect_raw(s: &impl Api, token: &str) -> Ws {
    let url = s.ws_url(&format!("/ws?accessToken={token}"));
    let (ws, _) = tungstenite::connect(url).expect("websocket connect");
    if let MaybeTlsStream::Plain(t) = ws.get_ref() {
        t.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    }
    ws
}

pub fn join(s: &impl Api, name: &str) -> Chatter {
    let (id, token, _) = register(s, Some(name));
    let mut ws = connect_raw(s, &token);
    let info = next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(5)).expect("CONNECTED_USER_INFO");
    assert_eq!(info["user"]["id"], id.as_str());
    assert_eq!(info["user"]["displayName"], name);
    Chatter { id, token, ws }
}

/// Every event of the next frames read within `timeout` (frames may carry several `\n`-separated events).
pub fn read_events(ws: &mut Ws, timeout: Duration) -> Result<Vec<Value>, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match ws.read() {
            Ok(Message::Text(t)) => {
                return Ok(t.as_str().split('\n').map(|l| serde_json::from_str(l).expect("event json")).collect())
            }
            Ok(Message::Close(_)) => return Err("closed".into()),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
            {
                if Instant::now() > deadline {
                    return Ok(Vec::new());
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The next event of type `kind` within `timeout` (others are skipped).
pub fn next_of(ws: &mut Ws, kind: &str, timeout: Duration) -> Option<Value> {
    next_where(ws, timeout, |e| e["type"] == kind)
}

pub fn next_where(ws: &mut Ws, timeout: Duration, f: impl Fn(&Value) -> bool) -> Option<Value> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        match read_events(ws, Duration::from_millis(300)) {
            Ok(evs) => {
                if let Some(e) = evs.into_iter().find(|e| f(e)) {
                    return Some(e);
                }
            }
            Err(_) => return None,
        }
    }
    None
}

pub fn send(ws: &mut Ws, ev: Value) {
    ws.send(Message::Text(ev.to_string().into())).expect("send");
}

pub fn say(ws: &mut Ws, body: &str) {
    send(ws, json!({ "type": "CHAT", "body": body }));
}

pub fn history(s: &impl Api, token: &str) -> Vec<Value> {
    s.get_json(&format!("/api/chat?accessToken={token}")).as_array().unwrap().clone()
}
