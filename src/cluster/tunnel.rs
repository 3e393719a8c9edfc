//! An edge's tunnel of a channel's chat websocket (`/c/{slug}/ws`) to the origin: the upgrade request goes
//! to the origin as it came (its `Host`, the client's address in `X-Forwarded-For`, the edge mark), and once
//! the origin has switched protocols the two connections are joined byte for byte until either side
//! closes. The origin holds the socket's chat state: a channel's chat room is the origin's.
//!
//! An http origin only (an edge reaches its origin on a private network); an https origin answers 502 here.
//! The origin's answer head is read to at most [`MAX_HEAD`] bytes within [`CONNECT_TIMEOUT`].

use std::net::IpAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Response as HttpResponse, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Cluster;
use crate::http::ApiError;
use crate::tasks::Stage;

/// Longest answer head read from the origin.
pub const MAX_HEAD: usize = 16 * 1024;
/// Time to connect to the origin and read its answer head.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Headers that belong to one hop and are not passed on (the upgrade's own are written explicitly).
const HOP: &[&str] = &["connection", "upgrade", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding"];

fn bad_gateway(why: impl std::fmt::Display) -> Response {
    tracing::warn!("edge: channel websocket tunnel: {why}");
    let mut r = ApiError::Internal(why.to_string()).into_response();
    *r.status_mut() = StatusCode::BAD_GATEWAY;
    r
}

/// Tunnel the websocket upgrade `req` (from `ip`) to the origin.
pub async fn open(cluster: &Cluster, mut req: Request, ip: Option<IpAddr>) -> Response {
    let Some(origin) = cluster.config.origin.as_ref() else { return bad_gateway("no origin") };
    if origin.scheme() != "http" {
        return bad_gateway("a channel's chat through an edge needs an http origin");
    }
    let (Some(host), Some(port)) = (origin.host_str(), origin.port_or_known_default()) else {
        return bad_gateway("the origin URL has no host");
    };
    let Some(tasks) = cluster.tasks.get().cloned() else { return bad_gateway("the cluster is not started") };
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_string();
    let mut head = format!("GET {path} HTTP/1.1\r\n");
    for (name, value) in req.headers() {
        let n = name.as_str();
        if HOP.contains(&n)
            || n == "x-forwarded-for"
            || n == super::SECRET_HEADER
            || n == crate::http::headers::EDGE_MARK_HEADER
        {
            continue;
        }
        if let Ok(v) = value.to_str() {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
    }
    head.push_str("Connection: Upgrade\r\nUpgrade: websocket\r\n");
    if let Some(ip) = ip {
        head.push_str(&format!("X-Forwarded-For: {ip}\r\n"));
    }
    head.push_str(&format!("{}: {}\r\n\r\n", crate::http::headers::EDGE_MARK_HEADER, cluster.edge_mark));
    let connected = tokio::time::timeout(CONNECT_TIMEOUT, async {
        let mut upstream = TcpStream::connect((host, port)).await?;
        upstream.write_all(head.as_bytes()).await?;
        let mut buf = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        loop {
            let n = upstream.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::Error::other("the origin closed the connection"));
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                return Ok((upstream, buf, end + 4));
            }
            if buf.len() > MAX_HEAD {
                return Err(std::io::Error::other("the origin's answer head is too long"));
            }
        }
    })
    .await;
    let (upstream, buf, head_len) = match connected {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return bad_gateway(e),
        Err(_) => return bad_gateway("the origin did not answer in time"),
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut headers);
    if !matches!(parsed.parse(&buf[..head_len]), Ok(httparse::Status::Complete(_))) {
        return bad_gateway("the origin's answer is not HTTP");
    }
    let status = StatusCode::from_u16(parsed.code.unwrap_or(502)).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut resp = HttpResponse::new(Body::empty());
    *resp.status_mut() = status;
    for h in parsed.headers.iter() {
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(h.name.as_bytes()), HeaderValue::from_bytes(h.value)) {
            resp.headers_mut().append(name, value);
        }
    }
    if status != StatusCode::SWITCHING_PROTOCOLS {
        // The origin refused (a ban, a full room, no such channel): its answer head as it was; the body
        // already read with it, if any.
        let body = buf[head_len..].to_vec();
        resp.headers_mut().remove(axum::http::header::TRANSFER_ENCODING);
        *resp.body_mut() = Body::from(body);
        return resp;
    }
    let leftover = buf[head_len..].to_vec();
    let upgrade = hyper::upgrade::on(&mut req);
    tasks.spawn(Stage::Connections, "edge: channel chat tunnel", async move {
        let mut upstream = upstream;
        let client = match upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!("edge: the client's upgrade failed: {e}");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        if !leftover.is_empty() && client.write_all(&leftover).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    });
    resp
}
