//! The "naive hub" anchor of the chat benchmark (ANCHORS.md, "Chat fan-out"): a minimal axum 0.8
//! websocket server that forwards every text message it receives to every socket through one tokio
//! broadcast channel. No users, no storage, no sanitizing: just the fan-out to compare castd with.
//!
//! Usage: `chat-anchor-hub [PORT]` (0 = any free port); prints `anchor listening on PORT`.

use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::broadcast;

async fn ws(State(tx): State<broadcast::Sender<Utf8Bytes>>, up: WebSocketUpgrade) -> Response {
    up.on_upgrade(move |socket| client(socket, tx))
}

async fn client(socket: WebSocket, tx: broadcast::Sender<Utf8Bytes>) {
    let (mut sink, mut stream) = socket.split();
    let mut rx = tx.subscribe();
    let writer = tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(m) => {
                    if sink.send(Message::Text(m)).await.is_err() {
                        break;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    eprintln!("anchor: a client lagged and lost {n} messages");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    while let Some(Ok(msg)) = stream.next().await {
        if let Message::Text(t) = msg {
            let _ = tx.send(t);
        }
    }
    writer.abort();
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    // Large enough that no client lags behind the ring at 10,000 clients (a lagging receiver loses
    // messages, which would make the anchor look faster than it is).
    let (tx, _) = broadcast::channel::<Utf8Bytes>(1 << 16);
    let app = Router::new().route("/ws", get(ws)).with_state(tx);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("anchor listening on {}", listener.local_addr()?.port());
    axum::serve(listener, app).await
}
