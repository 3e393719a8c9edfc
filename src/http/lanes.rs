//! Fast lanes: the web server's per-connection service, which hands the hottest GET routes (the HLS
//! playlists and segments every viewer fetches every second) straight to their handler, ahead of the
//! router and its middleware.
//!
//! A lane is registered beside an ordinary route that stays in the router (it documents the route and
//! answers everything the lane does not take: other methods, CORS preflight, the test router). A lane
//! takes `GET` and `HEAD` requests whose path starts with its prefix and must answer exactly as the
//! route would; the conventions the router's middleware would add to such an answer, the open CORS
//! header of the public API and the security headers (`conventions`, `headers::basic`), are added
//! here. Its handler already answers bad input with `StatusResponse` JSON, so nothing else needs
//! rewriting. What a lane saves per request is the
//! route match, the middleware's boxed futures and the request extensions (connect info, matched path,
//! body limit) that each cost an allocation: about a fifth of castd's CPU per playlist request.
//!
//! Everything else goes to the router with the peer's address as `ConnectInfo`, as
//! `into_make_service_with_connect_info` would have given it.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderValue, Method};
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use axum::Router;
use futures_util::future::Either;
use tower::Service;

/// What a lane's handler returns.
pub type LaneFuture = Pin<Box<dyn Future<Output = Response> + Send>>;

/// A handler that serves requests under a path prefix ahead of the router.
pub trait Lane: Send + Sync + 'static {
    fn serve(&self, req: Request, peer: SocketAddr) -> LaneFuture;

    /// Whether the lane takes `path` (under its prefix): a lane that serves only some paths under its
    /// prefix (the channels' lane: `/c/{slug}/hls/...` of `/c/`) leaves the others to the router. No
    /// default: a lane that wraps another must ask it.
    fn takes(&self, path: &str) -> bool;
}

/// A prefix and its lane.
pub type Lanes = Vec<(&'static str, Arc<dyn Lane>)>;

/// The router and its lanes: what the web server serves.
#[derive(Clone)]
pub struct WebService {
    router: Router,
    lanes: Arc<[(&'static str, Arc<dyn Lane>)]>,
}

impl WebService {
    pub fn new(router: Router, lanes: Vec<(&'static str, Arc<dyn Lane>)>) -> Self {
        Self { router, lanes: lanes.into() }
    }

    /// For `axum::serve`: one `Connection` service per accepted connection.
    pub fn into_make_service(self) -> MakeConnection {
        MakeConnection(self)
    }
}

/// Makes the per-connection service (see `WebService::into_make_service`).
#[derive(Clone)]
pub struct MakeConnection(WebService);

impl<'a, L> Service<IncomingStream<'a, L>> for MakeConnection
where
    L: Listener<Addr = SocketAddr>,
{
    type Response = Connection;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Connection, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'a, L>) -> Self::Future {
        std::future::ready(Ok(Connection { web: self.0.clone(), peer: *stream.remote_addr() }))
    }
}

/// One connection's service: a lane when one takes the request, else the router.
#[derive(Clone)]
pub struct Connection {
    web: WebService,
    peer: SocketAddr,
}

impl Connection {
    fn lane(&self, req: &Request) -> Option<&Arc<dyn Lane>> {
        if !matches!(*req.method(), Method::GET | Method::HEAD) {
            return None;
        }
        let path = req.uri().path();
        self.web.lanes.iter().find(|(prefix, lane)| path.starts_with(prefix) && lane.takes(path)).map(|(_, lane)| lane)
    }
}

/// A lane's answer with the public API's CORS header and the security headers every answer carries
/// (as the router's `conventions` adds them; a lane serves no page and no upload).
pub struct LaneAnswer(LaneFuture);

impl Future for LaneAnswer {
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut resp = std::task::ready!(self.0.as_mut().poll(cx));
        let h = resp.headers_mut();
        h.entry(header::ACCESS_CONTROL_ALLOW_ORIGIN).or_insert(HeaderValue::from_static("*"));
        super::headers::basic(h);
        Poll::Ready(Ok(resp))
    }
}

impl Service<Request> for Connection {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<LaneAnswer, <Router as Service<Request>>::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<Request>::poll_ready(&mut self.web.router, cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        if let Some(lane) = self.lane(&req) {
            return Either::Left(LaneAnswer(lane.serve(req, self.peer)));
        }
        req.extensions_mut().insert(ConnectInfo(self.peer));
        Either::Right(self.web.router.call(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;

    struct Echo;

    impl Lane for Echo {
        fn takes(&self, path: &str) -> bool {
            !path.ends_with("/skip")
        }

        fn serve(&self, req: Request, peer: SocketAddr) -> LaneFuture {
            let text = format!("lane {} {}", req.uri().path(), peer.ip());
            Box::pin(async move { Response::new(Body::from(text)) })
        }
    }

    async fn text(resp: Response) -> String {
        let bytes = axum::body::to_bytes(resp.into_body(), 1024).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn lanes_take_gets_under_their_prefix_and_the_router_the_rest() {
        let router = Router::new().route(
            "/{*path}",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { format!("router {}", peer.ip()) })
                .post(|| async { "router post" }),
        );
        let web = WebService::new(router, vec![("/hls/", Arc::new(Echo))]);
        let peer: SocketAddr = "192.0.2.7:4000".parse().unwrap();
        let mut conn = Connection { web, peer };
        let req = |m: Method, p: &str| Request::builder().method(m).uri(p).body(Body::empty()).unwrap();

        let resp = conn.call(req(Method::GET, "/hls/0/stream.m3u8")).await.unwrap();
        assert_eq!(resp.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert_eq!(resp.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(text(resp).await, "lane /hls/0/stream.m3u8 192.0.2.7");
        let resp = conn.call(req(Method::HEAD, "/hls/x.ts")).await.unwrap();
        assert_eq!(text(resp).await, "lane /hls/x.ts 192.0.2.7");

        let resp = conn.call(req(Method::POST, "/hls/x.ts")).await.unwrap();
        assert_eq!(text(resp).await, "router post");
        let resp = conn.call(req(Method::GET, "/api/status")).await.unwrap();
        assert_eq!(text(resp).await, "router 192.0.2.7", "the router gets the peer as ConnectInfo");
        let resp = conn.call(req(Method::GET, "/hlsx")).await.unwrap();
        assert_eq!(text(resp).await, "router 192.0.2.7");
        let resp = conn.call(req(Method::GET, "/hls/skip")).await.unwrap();
        assert_eq!(text(resp).await, "router 192.0.2.7", "a path the lane does not take goes to the router");
    }
}
