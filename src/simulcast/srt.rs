//! SRT targets (`srt://host:port`, the stream key sent as the SRT `streamid`), over srt-tokio, the stack of
//! the SRT ingest (`ingest::srt`), as a caller in live mode (500 ms latency).
//!
//! SRT carries MPEG-TS, sent in messages of 7 TS packets (1316 bytes), as libsrt publishers do. A source
//! that came in over SRT is forwarded as it came (`source` targets); an RTMP source needs a `variant`
//! target (the transcoder's MPEG-TS segments, as they are); a `source` target of an RTMP source says so
//! and stops.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use srt_tokio::SrtSocket;
use tokio_util::sync::CancellationToken;

use super::rtmp::{Ended, Progress, Source, CONNECT_TIMEOUT};
use super::SimulcastError;
use crate::media::MediaChunk;

/// Receive latency asked of the remote (the SRT ingest's own).
pub const LATENCY: Duration = Duration::from_millis(500);
/// Bytes per SRT message: 7 TS packets.
const MESSAGE: usize = 7 * 188;
/// How long a whole segment's packets are spread over (shorter than any segment).
const SEGMENT_SPREAD: Duration = Duration::from_millis(800);

/// `srt://host:port` as (host, port).
pub fn parse(url: &str) -> Result<(String, u16), String> {
    let rest = url.strip_prefix("srt://").ok_or("not an SRT URL")?;
    let rest = rest.split(['?', '/']).next().unwrap_or("");
    let (host, port) = rest.rsplit_once(':').ok_or("an SRT target is srt://host:port")?;
    let port = port.parse::<u16>().ok().filter(|p| *p > 0).ok_or("bad port")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err("the URL has no host".into());
    }
    Ok((host.to_string(), port))
}

/// Call `host:port` with `key` as the streamid.
/// The address is resolved through the channel's reach (a channel's target only to an address the
/// guard allows) and the call goes to that checked address.
pub async fn connect(
    host: &str,
    port: u16,
    key: &str,
    reach: &crate::outbound::Reach,
) -> Result<SrtSocket, SimulcastError> {
    let call = async {
        let addr: SocketAddr = super::resolve(reach, host, port)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| SimulcastError::Remote(format!("{host} has no address")))?;
        SrtSocket::builder()
            .latency(LATENCY)
            .call(addr, Some(key))
            .await
            .map_err(|e| SimulcastError::Refused(format!("SRT connect to {host}:{port}: {e}")))
    };
    tokio::time::timeout(CONNECT_TIMEOUT, call).await.unwrap_or_else(|_| {
        Err(SimulcastError::Remote(format!("no SRT answer from {host}:{port} within {} s", CONNECT_TIMEOUT.as_secs())))
    })
}

/// Send `source`'s MPEG-TS until the stream ends or `stop` is cancelled; then close the connection.
pub async fn forward(
    mut socket: SrtSocket,
    mut source: Source,
    stop: &CancellationToken,
    progress: &(dyn Progress + Sync),
) -> Result<Ended, SimulcastError> {
    let ended = loop {
        let chunk = tokio::select! {
            biased;
            _ = stop.cancelled() => break Ended::Stopped,
            c = source.recv() => c?,
        };
        let Some(chunk) = chunk else { break Ended::StreamEnded };
        let MediaChunk::Bytes { data, .. } = chunk else {
            return Err(SimulcastError::Unsupported(
                "SRT targets send MPEG-TS: the broadcaster came over RTMP, so choose a variant for this target".into(),
            ));
        };
        // A whole segment (a variant target) is spread over `SEGMENT_SPREAD` instead of one burst of UDP.
        let start = tokio::time::Instant::now();
        let pieces = data.len().div_ceil(MESSAGE) as u32;
        let spread = if data.len() > 64 * 1024 { SEGMENT_SPREAD / pieces.max(1) } else { Duration::ZERO };
        for (k, piece) in data.chunks(MESSAGE).enumerate() {
            if !spread.is_zero() {
                tokio::time::sleep_until(start + spread * k as u32).await;
            }
            let piece = data.slice_ref(piece);
            let len = piece.len() as u64;
            tokio::time::timeout(super::rtmp::WRITE_TIMEOUT, socket.send((Instant::now(), piece)))
                .await
                .map_err(|_| SimulcastError::Remote("the SRT connection took nothing for 10 s".into()))?
                .map_err(|e| SimulcastError::Remote(format!("SRT send: {e}")))?;
            progress.sent(len);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), socket.close()).await;
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(parse("srt://127.0.0.1:9000"), Ok(("127.0.0.1".to_string(), 9000)));
        assert_eq!(parse("srt://live.example.com:8890?latency=200"), Ok(("live.example.com".to_string(), 8890)));
        assert!(parse("srt://host").is_err());
        assert!(parse("srt://:9000").is_err());
        assert!(parse("rtmp://h:1/app").is_err());
    }
}
