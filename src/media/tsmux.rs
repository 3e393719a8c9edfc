//! An MPEG-TS muxer for protocols that carry bare access units (WHIP): H.264 and Opus in, the
//! transport stream the worker's `mpegts` demuxer reads out, as `MediaChunk::Bytes` runs.
//!
//! One program (PMT on PID 0x1000): H.264 (stream type 0x1B) on PID 0x100, which carries the PCR, and
//! Opus as private data (stream type 0x06 with the `Opus` registration descriptor and the DVB extension
//! descriptor 0x80 giving the channel configuration, as ETSI TS 102 366 annex and ffmpeg's muxer write
//! it; each Opus packet behind its control header) on PID 0x101. Timestamps are the caller's, in
//! 90 kHz units. Every keyframe starts a `random_access` run with the PAT and PMT (and the latest SPS
//! and PPS when the access unit lacks them), so a worker can join there; nothing is emitted before
//! the first keyframe.

use bytes::{BufMut, BytesMut};

use super::h264::{nal_type, nal_units, NAL_AUD, NAL_IDR, NAL_PPS, NAL_SPS};
use super::source::MediaChunk;
use super::ts::{PACKET, SYNC};

const PID_PAT: u16 = 0;
const PID_PMT: u16 = 0x1000;
pub const PID_VIDEO: u16 = 0x100;
pub const PID_AUDIO: u16 = 0x101;
/// How far the PCR runs behind the video's decode time (90 kHz): the decoder's buffer room.
const PCR_LEAD: u64 = 9000;
const MASK_33: u64 = (1 << 33) - 1;

/// MPEG-2 CRC-32 of a PSI section.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in data {
        crc ^= u32::from(b) << 24;
        for _ in 0..8 {
            crc = if crc & 0x8000_0000 != 0 { (crc << 1) ^ 0x04c1_1db7 } else { crc << 1 };
        }
    }
    crc
}

/// The muxer's state: continuity counters, the parameter sets, whether output has started.
pub struct TsMuxer {
    cc_pat: u8,
    cc_pmt: u8,
    cc_video: u8,
    cc_audio: u8,
    /// Opus channel count announced in the PMT (1 or 2).
    opus_channels: u8,
    sps: Option<Vec<u8>>,
    pps: Option<Vec<u8>>,
    started: bool,
}

impl TsMuxer {
    /// A muxer for H.264 video and Opus audio of `opus_channels` channels.
    pub fn new(opus_channels: u8) -> Self {
        TsMuxer {
            cc_pat: 0,
            cc_pmt: 0,
            cc_video: 0,
            cc_audio: 0,
            opus_channels: opus_channels.clamp(1, 2),
            sps: None,
            pps: None,
            started: false,
        }
    }

    /// Whether a keyframe has started the output.
    pub fn started(&self) -> bool {
        self.started
    }

    /// One H.264 access unit (Annex B) at `pts` (90 kHz; decode time is the same: no B-frames in
    /// real-time video). `None` before the first keyframe.
    pub fn video(&mut self, au: &[u8], pts: u64) -> Option<MediaChunk> {
        let mut keyframe = false;
        let (mut has_sps, mut has_pps, mut has_aud) = (false, false, false);
        for nal in nal_units(au) {
            match nal_type(nal) {
                NAL_IDR => keyframe = true,
                NAL_SPS => {
                    has_sps = true;
                    self.sps = Some(nal.to_vec());
                }
                NAL_PPS => {
                    has_pps = true;
                    self.pps = Some(nal.to_vec());
                }
                NAL_AUD => has_aud = true,
                _ => {}
            }
        }
        if keyframe && (self.sps.is_none() || self.pps.is_none()) {
            // Not decodable without its parameter sets: wait for a keyframe that brings them.
            return None;
        }
        if !keyframe && !self.started {
            return None;
        }
        self.started = true;
        let mut es = Vec::with_capacity(au.len() + 64);
        if !has_aud {
            es.extend_from_slice(&[0, 0, 0, 1, NAL_AUD, 0xf0]);
        }
        if keyframe {
            for (has, set) in [(has_sps, &self.sps), (has_pps, &self.pps)] {
                if let (false, Some(nal)) = (has, set) {
                    es.extend_from_slice(&[0, 0, 0, 1]);
                    es.extend_from_slice(nal);
                }
            }
        }
        es.extend_from_slice(au);
        let mut out = BytesMut::with_capacity(es.len() + es.len() / 180 * 8 + 3 * PACKET);
        if keyframe {
            self.tables(&mut out);
        }
        let pts = pts & MASK_33;
        let pcr = pts.wrapping_sub(PCR_LEAD) & MASK_33;
        let header = pes_header(0xe0, pts, Some(pts), 0);
        let mut cc = self.cc_video;
        write_packets(&mut out, PID_VIDEO, &mut cc, &header, &es, Some(pcr), keyframe);
        self.cc_video = cc;
        Some(MediaChunk::Bytes { data: out.freeze(), random_access: keyframe })
    }

    /// One Opus packet at `pts` (90 kHz). `None` before the first keyframe.
    pub fn audio(&mut self, packet: &[u8], pts: u64) -> Option<MediaChunk> {
        if !self.started {
            return None;
        }
        // The TS control header: the 11-bit prefix 0x3ff, no trim or extension flags, the size.
        let mut es = Vec::with_capacity(packet.len() + 8);
        es.extend_from_slice(&[0x7f, 0xe0]);
        let mut size = packet.len();
        while size >= 255 {
            es.push(0xff);
            size -= 255;
        }
        es.push(size as u8);
        es.extend_from_slice(packet);
        let header = pes_header(0xbd, pts & MASK_33, None, es.len());
        let mut out = BytesMut::with_capacity(es.len() + 2 * PACKET);
        let mut cc = self.cc_audio;
        write_packets(&mut out, PID_AUDIO, &mut cc, &header, &es, None, false);
        self.cc_audio = cc;
        Some(MediaChunk::Bytes { data: out.freeze(), random_access: false })
    }

    /// The PAT and the PMT, one packet each.
    fn tables(&mut self, out: &mut BytesMut) {
        // PAT: program 1 -> PMT PID.
        let pat_body = [0x00, 0x01, 0xe0 | (PID_PMT >> 8) as u8, PID_PMT as u8];
        let pat = section(0x00, 0x0001, &pat_body);
        let mut cc = self.cc_pat;
        write_packets(out, PID_PAT, &mut cc, &[0], &pat, None, false);
        self.cc_pat = cc;
        // PMT: PCR on the video PID, no program info, then the two streams.
        let mut body = vec![0xe0 | (PID_VIDEO >> 8) as u8, PID_VIDEO as u8, 0xf0, 0x00];
        body.extend_from_slice(&[0x1b, 0xe0 | (PID_VIDEO >> 8) as u8, PID_VIDEO as u8, 0xf0, 0x00]);
        let es_info = [0x05, 4, b'O', b'p', b'u', b's', 0x7f, 2, 0x80, self.opus_channels];
        body.extend_from_slice(&[0x06, 0xe0 | (PID_AUDIO >> 8) as u8, PID_AUDIO as u8, 0xf0, es_info.len() as u8]);
        body.extend_from_slice(&es_info);
        let pmt = section(0x02, 0x0001, &body);
        let mut cc = self.cc_pmt;
        write_packets(out, PID_PMT, &mut cc, &[0], &pmt, None, false);
        self.cc_pmt = cc;
    }
}

/// A long-form PSI section (version 0, current, section 0 of 0) with its CRC.
fn section(table_id: u8, id: u16, body: &[u8]) -> Vec<u8> {
    let len = 5 + body.len() + 4;
    let mut s = vec![table_id, 0xb0 | (len >> 8) as u8, len as u8, (id >> 8) as u8, id as u8, 0xc1, 0, 0];
    s.extend_from_slice(body);
    let crc = crc32(&s);
    s.extend_from_slice(&crc.to_be_bytes());
    s
}

/// A 33-bit timestamp in the PES header's five bytes, behind the 4-bit `prefix`.
fn timestamp(prefix: u8, ts: u64) -> [u8; 5] {
    [
        (prefix << 4) | (((ts >> 29) as u8) & 0x0e) | 1,
        (ts >> 22) as u8,
        (((ts >> 14) as u8) & 0xfe) | 1,
        (ts >> 7) as u8,
        (((ts << 1) as u8) & 0xfe) | 1,
    ]
}

/// A PES header for `stream_id` with a PTS (and a DTS when given); `es_len` is the payload length
/// (0 for an unbounded video PES).
fn pes_header(stream_id: u8, pts: u64, dts: Option<u64>, es_len: usize) -> Vec<u8> {
    let ts_len = if dts.is_some() { 10 } else { 5 };
    let pes_len = if es_len == 0 { 0 } else { (3 + ts_len + es_len).min(0xffff) };
    let mut h = vec![0, 0, 1, stream_id, (pes_len >> 8) as u8, pes_len as u8, 0x84];
    match dts {
        Some(dts) => {
            h.extend_from_slice(&[0xc0, 10]);
            h.extend_from_slice(&timestamp(0x3, pts));
            h.extend_from_slice(&timestamp(0x1, dts));
        }
        None => {
            h.extend_from_slice(&[0x80, 5]);
            h.extend_from_slice(&timestamp(0x2, pts));
        }
    }
    h
}

/// Write `head` then `body` as the payload of packets of `pid` (the first with the start flag, the
/// PCR and the random-access indicator), the last one padded with adaptation-field stuffing.
fn write_packets(
    out: &mut BytesMut,
    pid: u16,
    cc: &mut u8,
    head: &[u8],
    body: &[u8],
    pcr: Option<u64>,
    random_access: bool,
) {
    let total = head.len() + body.len();
    let mut pos = 0;
    let mut first = true;
    let byte_at = |i: usize| if i < head.len() { head[i] } else { body[i - head.len()] };
    while pos < total || first {
        // The adaptation field's content (after its length byte).
        let mut af: Vec<u8> = Vec::new();
        if first && (pcr.is_some() || random_access) {
            let mut flags = 0u8;
            if random_access {
                flags |= 0x40;
            }
            if pcr.is_some() {
                flags |= 0x10;
            }
            af.push(flags);
            if let Some(base) = pcr {
                af.extend_from_slice(&[
                    (base >> 25) as u8,
                    (base >> 17) as u8,
                    (base >> 9) as u8,
                    (base >> 1) as u8,
                    (((base & 1) as u8) << 7) | 0x7e,
                    0,
                ]);
            }
        }
        let remaining = total - pos;
        let mut af_total = if af.is_empty() { 0 } else { 1 + af.len() };
        if remaining < 184 - af_total {
            // Stuff: the adaptation field grows so the payload ends the packet exactly.
            let need = 184 - remaining;
            if af.is_empty() && need >= 2 {
                af.push(0);
            }
            while 1 + af.len() < need && need >= 2 {
                af.push(0xff);
            }
            af_total = need;
        }
        let afc = if af_total > 0 { 0x30 } else { 0x10 };
        out.put_u8(SYNC);
        out.put_u8(if first { 0x40 } else { 0 } | ((pid >> 8) as u8 & 0x1f));
        out.put_u8(pid as u8);
        out.put_u8(afc | (*cc & 0x0f));
        *cc = cc.wrapping_add(1) & 0x0f;
        if af_total > 0 {
            out.put_u8((af_total - 1) as u8);
            out.put_slice(&af);
        }
        let take = 184 - af_total;
        let take = take.min(remaining);
        for i in pos..pos + take {
            out.put_u8(byte_at(i));
        }
        pos += take;
        first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::super::ts::{header, Demux, Framer};
    use super::*;

    fn au(keyframe: bool) -> Vec<u8> {
        let mut v = vec![0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1e, 0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80];
        v.extend_from_slice(&[0, 0, 0, 1, if keyframe { 0x65 } else { 0x41 }]);
        v.extend(std::iter::repeat_n(0xab, 1000));
        v
    }

    #[test]
    fn crc_of_a_known_pat() {
        // ffmpeg's PAT for program 1 on PMT PID 0x1000, transport stream id 1.
        let s = section(0, 1, &[0, 1, 0xf0, 0]);
        assert_eq!(&s[s.len() - 4..], &[0x2a, 0xb1, 0x04, 0xb2]);
    }

    #[test]
    fn nothing_before_a_keyframe_then_demuxable_runs() {
        let mut m = TsMuxer::new(2);
        assert!(m.video(&au(false), 9000).is_none());
        assert!(m.audio(&[1, 2, 3], 9000).is_none());
        let key = m.video(&au(true), 12000).expect("keyframe");
        assert!(key.is_random_access());
        let a = m.audio(&[7; 300], 12000).expect("audio");
        let p = m.video(&au(false), 15000).expect("p frame");
        let mut d = Demux::default();
        let mut f = Framer::default();
        for c in [&key, &a, &p] {
            let MediaChunk::Bytes { data, .. } = c else { unreachable!() };
            assert_eq!(data.len() % PACKET, 0);
            for pk in data.chunks(PACKET) {
                assert!(header(pk).is_some());
            }
            f.push(data, |pk| d.packet(pk));
        }
        let prog = d.take_program_change().expect("program");
        assert_eq!(prog.video_codec, "H.264");
        assert_eq!(prog.audio_codec, "Opus");
        assert_eq!(prog.video_pid, Some(PID_VIDEO));
        let chunks = d.take_chunks();
        assert!(chunks[0].is_random_access(), "the demuxer finds the keyframe run");
    }
}
