//! The RTP payloads of the real-time feed, made once per frame for every viewer: an H.264 access unit
//! becomes its packetization-mode-1 payloads (single NAL units, FU-A fragments, SPS and PPS together in
//! a STAP-A before the next unit, as str0m's own packetizer makes them), an Opus packet one payload.
//! Each viewer writes the same payloads (`Arc<[u8]>`, shared, not copied) to its send stream with its
//! own sequence numbers (`Viewer::app`, str0m's `StreamTx::write_rtp`), where it packetised every
//! frame itself before (bench/webrtc/PROFILE.md: 8–10 % of castd's CPU with 100 viewers).
//!
//! The payloads of the last `RECENT` frames are kept (`payloads`), found by the frame's bytes (the
//! feed's frames are shared `Bytes`: one allocation per frame for every subscriber); a viewer that
//! lags further behind packetises its frame itself. Two viewers that miss at once both packetise
//! (the same result); the entry kept holds the frame's bytes, so no other frame can take its address.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::media::realtime::RtFrame;

/// Largest RTP payload: str0m's for its default MTU (1150 bytes less the SRTP tag, down to a
/// multiple of the SRTP block), so packets are as large as before.
pub(super) const PAYLOAD_MAX: usize = 1120;
/// Frames whose payloads are kept (a second of video and audio; viewers run within a few frames of
/// each other).
const RECENT: usize = 64;

/// One RTP payload, and whether its packet carries the marker bit (the last of an access unit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Payload {
    pub data: Arc<[u8]>,
    pub marker: bool,
}

/// The payloads of recent frames, by the address and length of the frame's bytes.
static RECENT_PAYLOADS: Mutex<VecDeque<(Bytes, Arc<[Payload]>)>> = Mutex::new(VecDeque::new());

/// The payloads of `frame` (video: H.264; audio: Opus), made once for every viewer.
pub(super) fn payloads(frame: &RtFrame) -> Arc<[Payload]> {
    let same = |b: &Bytes| b.as_ptr() == frame.data.as_ptr() && b.len() == frame.data.len();
    if let Some((_, p)) = RECENT_PAYLOADS.lock().iter().rev().find(|(b, _)| same(b)) {
        return p.clone();
    }
    let made: Arc<[Payload]> = if frame.video {
        h264(&frame.data, PAYLOAD_MAX).into()
    } else {
        vec![Payload { data: Arc::from(&frame.data[..]), marker: false }].into()
    };
    if !frame.data.is_empty() {
        let mut recent = RECENT_PAYLOADS.lock();
        if recent.len() >= RECENT {
            recent.pop_front();
        }
        recent.push_back((frame.data.clone(), made.clone()));
    }
    made
}

const STAP_A: u8 = 24;
const FU_A: u8 = 28;

/// The packetization-mode-1 payloads of one Annex B access unit, each at most `max` bytes: access
/// unit delimiters and filler dropped, SPS and PPS held and sent together as a STAP-A in front of
/// the next unit, a unit that fits as itself, a larger one as FU-A fragments (all `max` bytes but the
/// last). The last payload carries the marker.
pub(super) fn h264(au: &[u8], max: usize) -> Vec<Payload> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let (mut sps, mut pps): (Option<&[u8]>, Option<&[u8]>) = (None, None);
    for nal in crate::media::h264::nal_units(au) {
        match nal[0] & 0x1f {
            9 | 12 => continue,
            7 => {
                sps = Some(nal);
                continue;
            }
            8 => {
                pps = Some(nal);
                continue;
            }
            _ => {}
        }
        if let (Some(s), Some(p)) = (sps.take(), pps.take()) {
            if 1 + 2 + s.len() + 2 + p.len() <= max {
                let mut stap = Vec::with_capacity(1 + 2 + s.len() + 2 + p.len());
                // F = 0, NRI = 3 (the highest of the two), type 24.
                stap.push(0x60 | STAP_A);
                for unit in [s, p] {
                    stap.extend_from_slice(&(unit.len() as u16).to_be_bytes());
                    stap.extend_from_slice(unit);
                }
                out.push(stap);
            }
        }
        if nal.len() <= max {
            out.push(nal.to_vec());
            continue;
        }
        if max <= 2 {
            continue;
        }
        let (header, body) = (nal[0], &nal[1..]);
        let chunks = body.chunks(max - 2);
        let last = chunks.len() - 1;
        for (i, chunk) in chunks.enumerate() {
            let mut fu = Vec::with_capacity(2 + chunk.len());
            fu.push((header & 0x60) | FU_A);
            let start_end = match i {
                0 => 0x80,
                i if i == last => 0x40,
                _ => 0,
            };
            fu.push(start_end | (header & 0x1f));
            fu.extend_from_slice(chunk);
            out.push(fu);
        }
    }
    let n = out.len();
    out.into_iter().enumerate().map(|(i, p)| Payload { data: p.into(), marker: i + 1 == n }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Undo `h264`: the NAL units, from single units, STAP-A and FU-A fragments.
    fn units(payloads: &[Payload]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut fu: Option<Vec<u8>> = None;
        for p in payloads {
            let d = &p.data[..];
            match d[0] & 0x1f {
                STAP_A => {
                    let mut rest = &d[1..];
                    while rest.len() >= 2 {
                        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
                        out.push(rest[2..2 + len].to_vec());
                        rest = &rest[2 + len..];
                    }
                }
                FU_A => {
                    if d[1] & 0x80 != 0 {
                        fu = Some(vec![(d[0] & 0xe0) | (d[1] & 0x1f)]);
                    }
                    let f = fu.as_mut().expect("a fragment after a start");
                    f.extend_from_slice(&d[2..]);
                    if d[1] & 0x40 != 0 {
                        out.push(fu.take().unwrap());
                    }
                }
                _ => out.push(d.to_vec()),
            }
        }
        out
    }

    fn annex_b(units: &[&[u8]]) -> Vec<u8> {
        units.iter().flat_map(|u| [&[0, 0, 0, 1][..], u].concat()).collect()
    }

    /// A keyframe (AUD, SPS, PPS, a large IDR slice): STAP-A of the parameter sets, then the slice in
    /// equal FU-A fragments but the last; the units come back whole; only the last has the marker.
    #[test]
    fn a_keyframe_is_a_stap_a_then_fragments() {
        let idr: Vec<u8> = std::iter::once(0x65).chain((0..3000u32).map(|i| (i % 251) as u8 | 1)).collect();
        let (sps, pps) = (&[0x67u8, 0x42, 0xc0, 0x1e][..], &[0x68u8, 0xce, 0x3c, 0x80][..]);
        let au = annex_b(&[&[0x09, 0xf0], sps, pps, &idr]);
        let p = h264(&au, 1120);
        assert_eq!(p[0].data[0], 0x60 | STAP_A);
        assert!(p[1..].iter().all(|x| x.data[0] & 0x1f == FU_A && x.data[0] & 0x60 == 0x60));
        assert_eq!(p.len(), 1 + 3, "3000 bytes after the header in 1118-byte fragments");
        assert!(p[1..p.len() - 1].iter().all(|x| x.data.len() == 1120), "equal fragments but the last");
        assert_eq!(units(&p), vec![sps.to_vec(), pps.to_vec(), idr]);
        assert_eq!(p.iter().filter(|x| x.marker).count(), 1);
        assert!(p.last().unwrap().marker);
    }

    /// Small units go as themselves; a frame without parameter sets has no STAP-A.
    #[test]
    fn small_units_are_single_nal_unit_packets() {
        let (a, b) = (&[0x41u8, 1, 2, 3][..], &[0x01u8, 4, 5][..]);
        let p = h264(&annex_b(&[a, b]), 1120);
        assert_eq!(units(&p), vec![a.to_vec(), b.to_vec()]);
        assert_eq!(p.iter().map(|x| x.marker).collect::<Vec<_>>(), vec![false, true]);
        assert!(h264(&[], 1120).is_empty());
    }

    /// The same frame (the same shared bytes) gets the same payloads, made once; another frame with
    /// equal contents but its own bytes gets its own.
    #[test]
    fn a_frame_is_packetised_once_for_every_viewer() {
        let data = Bytes::from(annex_b(&[&[0x41, 7, 7, 7]]));
        let f = RtFrame { video: true, keyframe: false, pts_us: 0, at: Instant::now(), data: data.clone() };
        let (a, b) = (payloads(&f), payloads(&f.clone()));
        assert!(Arc::ptr_eq(&a, &b), "the second viewer reuses the first one's payloads");
        let copy = RtFrame { data: Bytes::from(data.to_vec()), ..f.clone() };
        let c = payloads(&copy);
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(a, c);
        let opus = RtFrame { video: false, data: Bytes::from_static(&[0xfc, 1, 2]), ..f };
        assert_eq!(&payloads(&opus)[..], &[Payload { data: Arc::from(&[0xfc, 1, 2][..]), marker: false }]);
    }
}
