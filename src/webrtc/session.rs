//! The session driver: one task per WebRTC session owns its `Rtc` and runs str0m's loop (every
//! mutation followed by draining `poll_output` to its timeout): datagrams from the demultiplexer, the
//! timeouts str0m asks for, the application's own mutations (`Peer::poll_app`, how WHEP will write
//! media), and the session's stop token. What str0m transmits is sent on the shared socket.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use str0m::net::{Protocol, Receive};
use str0m::{Event, IceConnectionState, Input, Output, Rtc};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

/// Time a session has to connect (ICE and DTLS) after its answer; then it ends.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

use super::Datagram;

/// Whether a session goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Close,
}

/// What a session does with its connection: one per session, owned by its driver.
pub trait Peer: Send + 'static {
    /// An event of the connection (media in, state changes, keyframe requests, statistics).
    fn event(&mut self, rtc: &mut Rtc, event: Event) -> Flow;

    /// Ready when the application has a mutation to make (WHEP: media to send). The driver then calls
    /// `app`. The default is never.
    fn poll_app(&mut self, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }

    /// Make the mutation `poll_app` announced (one; the driver drains the output after it).
    fn app(&mut self, _rtc: &mut Rtc) -> Flow {
        Flow::Continue
    }

    /// The session ended (whatever the reason); called once.
    fn closed(&mut self) {}
}

/// One session's loop.
pub(super) struct Driver {
    pub(super) rtc: Rtc,
    pub(super) peer: Box<dyn Peer>,
    pub(super) rx: mpsc::Receiver<Datagram>,
    pub(super) socket: Arc<UdpSocket>,
    pub(super) local: SocketAddr,
    pub(super) stop: CancellationToken,
    pub(super) label: String,
    /// Whether ICE and DTLS are up (`Event::Connected`).
    pub(super) connected: bool,
}

enum Wake {
    Datagram(Datagram),
    App,
    Timeout,
    Stop,
    /// The session's datagram queue is gone (the WebRTC stack forgot the session).
    Gone,
}

impl Driver {
    pub(super) async fn run(mut self) {
        let label = self.label.clone();
        debug!("webrtc {label}: started");
        let connect_by = Instant::now() + CONNECT_TIMEOUT;
        loop {
            let Some(deadline) = self.drain().await else { break };
            if !self.rtc.is_alive() {
                debug!("webrtc {label}: the connection is no longer alive");
                break;
            }
            if !self.connected && Instant::now() >= connect_by {
                info!("webrtc {label}: did not connect within {CONNECT_TIMEOUT:?}");
                break;
            }
            let deadline = if self.connected { deadline } else { deadline.min(connect_by) };
            let sleep = tokio::time::Instant::from_std(deadline);
            let peer = &mut self.peer;
            let wake = tokio::select! {
                d = self.rx.recv() => d.map_or(Wake::Gone, Wake::Datagram),
                _ = poll_fn(|cx| peer.poll_app(cx)) => Wake::App,
                _ = tokio::time::sleep_until(sleep) => Wake::Timeout,
                _ = self.stop.cancelled() => Wake::Stop,
            };
            let result = match wake {
                Wake::Datagram(d) => {
                    let Ok(contents) = d.data[..].try_into() else { continue };
                    let input = Input::Receive(
                        d.at,
                        Receive { proto: Protocol::Udp, source: d.from, destination: self.local, contents },
                    );
                    if !self.rtc.accepts(&input) {
                        continue;
                    }
                    self.rtc.handle_input(input)
                }
                Wake::App => {
                    if self.peer.app(&mut self.rtc) == Flow::Close {
                        debug!("webrtc {label}: closed by castd");
                        break;
                    }
                    Ok(())
                }
                Wake::Timeout => self.rtc.handle_input(Input::Timeout(Instant::now())),
                Wake::Stop => {
                    debug!("webrtc {label}: stopped (closed, or the server stops)");
                    break;
                }
                Wake::Gone => {
                    debug!("webrtc {label}: its datagram queue is gone");
                    break;
                }
            };
            if let Err(e) = result {
                info!("webrtc {label}: the connection failed: {e}");
                break;
            }
        }
        self.rtc.disconnect();
        // Flush what disconnecting sends (nothing with ICE-lite, but keep the invariant).
        let _ = self.drain().await;
        self.peer.closed();
        debug!("webrtc {label}: ended");
    }

    /// Drain `poll_output` to its timeout: send transmits, hand events to the peer. `None` when the
    /// session is over (the peer closed it, the remote disconnected, str0m failed).
    async fn drain(&mut self) -> Option<Instant> {
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => return Some(t),
                Ok(Output::Transmit(t)) => {
                    if let Err(e) = self.socket.send_to(&t.contents, t.destination).await {
                        debug!("webrtc {}: send to {}: {e}", self.label, t.destination);
                    }
                }
                Ok(Output::Event(e)) => {
                    let gone = matches!(e, Event::IceConnectionStateChange(IceConnectionState::Disconnected));
                    if gone {
                        info!("webrtc {}: the peer went away", self.label);
                    }
                    // Not `==`: str0m's PartialEq for Event is false for Connected.
                    if matches!(e, Event::Connected) {
                        self.connected = true;
                    }
                    if self.peer.event(&mut self.rtc, e) == Flow::Close || gone {
                        return None;
                    }
                }
                Err(e) => {
                    info!("webrtc {}: {e}", self.label);
                    return None;
                }
            }
        }
    }
}
