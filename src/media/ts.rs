//! MPEG-TS, the container SRT publishers send: whole 188-byte packets out of arbitrary byte runs,
//! the program tables (PAT, PMT, SDT) and where a decoder can join.
//!
//! `Framer` cuts packets out of the bytes a transport delivers (resynchronising on the sync byte).
//! `Demux` reads each packet's header, learns the first program's PMT from the PAT, the video and
//! audio streams from the PMT (their codecs by stream type) and the encoder from the SDT's service
//! descriptor, and turns packets into `MediaChunk::Bytes` runs: a run is `random_access` when it starts
//! at a video PES whose adaptation field has the random-access indicator or whose first packet holds an
//! IDR/IRAP picture or a parameter set (SPS/VPS), and such a run always begins with the latest PAT and
//! PMT, so a worker started there can demux it at once. Audio-only programs join at any audio PES
//! start. Nothing here allocates per packet beyond the output runs; malformed tables are ignored.

use bytes::{Bytes, BytesMut};

use super::source::MediaChunk;

/// Size of a transport stream packet.
pub const PACKET: usize = 188;
/// The first byte of every packet.
pub const SYNC: u8 = 0x47;
const PID_PAT: u16 = 0;
const PID_SDT: u16 = 0x11;
const PID_NULL: u16 = 0x1fff;

/// Cuts whole packets out of a byte stream; bytes before a sync byte are skipped.
#[derive(Default)]
pub struct Framer {
    partial: Vec<u8>,
}

impl Framer {
    /// Append `data`; call `f` with each whole packet now available.
    pub fn push(&mut self, data: &[u8], mut f: impl FnMut(&[u8])) {
        let mut data = data;
        if !self.partial.is_empty() {
            let need = PACKET - self.partial.len();
            let take = need.min(data.len());
            self.partial.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.partial.len() < PACKET {
                return;
            }
            let packet = std::mem::take(&mut self.partial);
            f(&packet);
        }
        while !data.is_empty() {
            if data[0] != SYNC {
                match data.iter().position(|&b| b == SYNC) {
                    Some(i) => data = &data[i..],
                    None => return,
                }
            }
            if data.len() < PACKET {
                self.partial.extend_from_slice(data);
                return;
            }
            f(&data[..PACKET]);
            data = &data[PACKET..];
        }
    }
}

/// A packet's header fields that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub pid: u16,
    /// payload_unit_start_indicator: a PES or a section starts in this packet.
    pub start: bool,
    /// The adaptation field's random_access_indicator.
    pub random_access: bool,
    /// Offset of the payload in the packet (`PACKET` when there is none).
    pub payload: usize,
}

/// The header of `p` (a whole packet), or `None` when it is not one.
pub fn header(p: &[u8]) -> Option<Header> {
    if p.len() != PACKET || p[0] != SYNC {
        return None;
    }
    let pid = (u16::from(p[1] & 0x1f) << 8) | u16::from(p[2]);
    let start = p[1] & 0x40 != 0;
    let afc = (p[3] >> 4) & 0x3;
    let mut payload = 4;
    let mut random_access = false;
    if afc & 0x2 != 0 {
        let len = usize::from(p[4]);
        if len > 0 {
            random_access = p[5] & 0x40 != 0;
        }
        payload = 5 + len;
    }
    if afc & 0x1 == 0 || payload > PACKET {
        payload = PACKET;
    }
    Some(Header { pid, start, random_access, payload })
}

/// What the program tables say about the stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Program {
    pub video_pid: Option<u16>,
    pub video_codec: String,
    pub audio_pid: Option<u16>,
    pub audio_codec: String,
    /// The SDT's service provider and name ("FFmpeg Service01"), if the stream has one.
    pub encoder: String,
}

/// Name of a video stream type (ISO/IEC 13818-1 table 2-34), `None` when it is not video.
pub fn video_codec_name(stream_type: u8) -> Option<&'static str> {
    match stream_type {
        0x01 | 0x02 => Some("MPEG-2"),
        0x10 => Some("MPEG-4"),
        0x1b => Some("H.264"),
        0x24 => Some("HEVC"),
        0x33 => Some("VVC"),
        _ => None,
    }
}

/// Name of an audio stream type, `None` when it is not audio. Private data (0x06) is Opus when the
/// ES info carries an `Opus` registration descriptor.
pub fn audio_codec_name(stream_type: u8, es_info: &[u8]) -> Option<&'static str> {
    match stream_type {
        0x03 | 0x04 => Some("MP3"),
        0x0f | 0x11 => Some("AAC"),
        0x81 => Some("AC-3"),
        0x87 => Some("E-AC-3"),
        0x06 => descriptors(es_info).find_map(|(tag, body)| match tag {
            0x05 if body.starts_with(b"Opus") => Some("Opus"),
            0x6a => Some("AC-3"),
            0x7a => Some("E-AC-3"),
            _ => None,
        }),
        _ => None,
    }
}

/// The (tag, body) descriptors of a descriptor loop; stops at a truncated one.
fn descriptors(mut d: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        if d.len() < 2 {
            return None;
        }
        let (tag, len) = (d[0], usize::from(d[1]));
        let body = d.get(2..2 + len)?;
        d = &d[2 + len..];
        Some((tag, body))
    })
}

/// The section that starts in the payload `pl` of a packet with the start flag (one-packet sections;
/// PAT, PMT and SDT of a live encoder fit in one), without its CRC: (table_id, body after the
/// 8-byte long header).
fn section(pl: &[u8]) -> Option<(u8, &[u8])> {
    let pointer = usize::from(*pl.first()?);
    let s = pl.get(1 + pointer..)?;
    if s.len() < 3 {
        return None;
    }
    let table_id = s[0];
    let len = (usize::from(s[1] & 0x0f) << 8) | usize::from(s[2]);
    // 5 more header bytes, then the body, then a 4-byte CRC.
    if len < 9 {
        return None;
    }
    let body = s.get(8..3 + len - 4)?;
    Some((table_id, body))
}

/// The PMT PID of the PAT's first program.
fn parse_pat(body: &[u8]) -> Option<u16> {
    body.chunks_exact(4).find_map(|e| {
        let program = u16::from_be_bytes([e[0], e[1]]);
        (program != 0).then(|| (u16::from(e[2] & 0x1f) << 8) | u16::from(e[3]))
    })
}

/// The first video and the first audio stream of a PMT body.
fn parse_pmt(body: &[u8], program: &mut Program) -> Option<()> {
    let info_len = (usize::from(*body.get(2)? & 0x0f) << 8) | usize::from(*body.get(3)?);
    let mut es = body.get(4 + info_len..)?;
    let (mut video, mut audio) = (None, None);
    while es.len() >= 5 {
        let stream_type = es[0];
        let pid = (u16::from(es[1] & 0x1f) << 8) | u16::from(es[2]);
        let len = (usize::from(es[3] & 0x0f) << 8) | usize::from(es[4]);
        let info = es.get(5..5 + len)?;
        if video.is_none() {
            if let Some(name) = video_codec_name(stream_type) {
                video = Some((pid, name));
            }
        }
        if audio.is_none() {
            if let Some(name) = audio_codec_name(stream_type, info) {
                audio = Some((pid, name));
            }
        }
        es = &es[5 + len..];
    }
    program.video_pid = video.map(|v| v.0);
    program.video_codec = video.map(|v| v.1.to_string()).unwrap_or_default();
    program.audio_pid = audio.map(|a| a.0);
    program.audio_codec = audio.map(|a| a.1.to_string()).unwrap_or_default();
    Some(())
}

/// The service descriptor's provider and service name of the SDT's first service.
fn parse_sdt(body: &[u8]) -> Option<String> {
    // original_network_id (2), reserved (1), then services.
    let s = body.get(3..)?;
    if s.len() < 5 {
        return None;
    }
    let loop_len = (usize::from(s[3] & 0x0f) << 8) | usize::from(s[4]);
    let d = s.get(5..5 + loop_len)?;
    let (_, sd) = descriptors(d).find(|(tag, _)| *tag == 0x48)?;
    let provider_len = usize::from(*sd.get(1)?);
    let provider = sd.get(2..2 + provider_len)?;
    let name_len = usize::from(*sd.get(2 + provider_len)?);
    let name = sd.get(3 + provider_len..3 + provider_len + name_len)?;
    let text = |b: &[u8]| {
        // A leading byte below 0x20 selects a character table; names are ASCII in practice.
        let b = if b.first().is_some_and(|c| *c < 0x20) { &b[1..] } else { b };
        String::from_utf8_lossy(b).chars().filter(|c| !c.is_control()).collect::<String>()
    };
    let joined = [text(provider), text(name)].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ");
    Some(joined.chars().take(128).collect())
}

/// Whether the elementary stream bytes at the start of a video PES hold a NAL unit a decoder can join
/// at (H.264: IDR, SPS; HEVC: IRAP, VPS, SPS).
fn joinable_nal(es: &[u8], hevc: bool) -> bool {
    let mut i = 0;
    while i + 3 < es.len() {
        if es[i] == 0 && es[i + 1] == 0 && es[i + 2] == 1 {
            let b = es[i + 3];
            let joinable = if hevc {
                let t = (b >> 1) & 0x3f;
                (16..=21).contains(&t) || t == 32 || t == 33
            } else {
                let t = b & 0x1f;
                t == 5 || t == 7
            };
            if joinable {
                return true;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    false
}

/// The elementary stream bytes of a PES start (after the PES header), if `pl` is one.
fn pes_payload(pl: &[u8]) -> Option<&[u8]> {
    if pl.len() < 9 || pl[..3] != [0, 0, 1] {
        return None;
    }
    pl.get(9 + usize::from(pl[8])..)
}

/// Turns packets into media runs, learning the program on the way.
#[derive(Default)]
pub struct Demux {
    pmt_pid: Option<u16>,
    /// The latest PAT and PMT packets, replayed before each random-access run.
    pat: Option<Bytes>,
    pmt: Option<Bytes>,
    /// PAT/PMT packets just received, held until the next other packet decides where they go.
    held: Vec<u8>,
    program: Program,
    /// Set when the program changed since `take_program_change`.
    program_changed: bool,
    /// The run being built (whole packets) and whether it starts at a random-access point.
    run: BytesMut,
    run_random_access: bool,
    done: Vec<MediaChunk>,
    /// Payload bytes of the video and audio streams since `take_bytes`.
    bytes: (u64, u64),
    /// The picture size and frame rate of the latest H.264 SPS, and whether it changed since
    /// `take_picture_change`.
    picture: Option<super::h264::SpsInfo>,
    picture_changed: bool,
}

impl Demux {
    /// What the program tables said so far.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The program, once after each change.
    pub fn take_program_change(&mut self) -> Option<Program> {
        std::mem::take(&mut self.program_changed).then(|| self.program.clone())
    }

    /// The picture size and frame rate (from the H.264 SPS), once after each change.
    pub fn take_picture_change(&mut self) -> Option<super::h264::SpsInfo> {
        std::mem::take(&mut self.picture_changed).then_some(self.picture).flatten()
    }

    /// Video and audio payload bytes since the last call.
    pub fn take_bytes(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.bytes)
    }

    /// Take in one whole packet (`Framer` output). Null packets and non-packets are dropped.
    pub fn packet(&mut self, p: &[u8]) {
        let Some(h) = header(p) else { return };
        if h.pid == PID_NULL {
            return;
        }
        let pl = &p[h.payload..];
        if h.pid == PID_PAT || Some(h.pid) == self.pmt_pid {
            self.table(h, pl);
            let copy = Bytes::copy_from_slice(p);
            if h.pid == PID_PAT {
                self.pat = Some(copy);
            } else {
                self.pmt = Some(copy);
            }
            self.held.extend_from_slice(p);
            return;
        }
        if h.pid == PID_SDT && h.start {
            if let Some((0x42, body)) = section(pl) {
                if let Some(encoder) = parse_sdt(body) {
                    if encoder != self.program.encoder {
                        self.program.encoder = encoder;
                        self.program_changed = true;
                    }
                }
            }
        }
        let is_video = Some(h.pid) == self.program.video_pid;
        if is_video {
            self.bytes.0 += pl.len() as u64;
            // The SPS leads each keyframe's PES (after the access unit delimiter) in the first packet.
            if h.start && self.program.video_codec == "H.264" {
                if let Some(sps) = pes_payload(pl).and_then(super::h264::find_sps) {
                    if self.picture != Some(sps) {
                        self.picture = Some(sps);
                        self.picture_changed = true;
                    }
                }
            }
        } else if Some(h.pid) == self.program.audio_pid {
            self.bytes.1 += pl.len() as u64;
        }
        if self.joinable(h, pl) {
            self.finish_run();
            self.held.clear();
            if let (Some(pat), Some(pmt)) = (&self.pat, &self.pmt) {
                self.run.extend_from_slice(pat);
                self.run.extend_from_slice(pmt);
            }
            self.run_random_access = true;
        } else if !self.held.is_empty() {
            self.run.extend_from_slice(&self.held);
            self.held.clear();
        }
        self.run.extend_from_slice(p);
    }

    /// The runs completed so far, and the one being built (call after each transport read). PAT/PMT
    /// packets still held stay for the next call.
    pub fn take_chunks(&mut self) -> Vec<MediaChunk> {
        self.finish_run();
        std::mem::take(&mut self.done)
    }

    fn finish_run(&mut self) {
        if !self.run.is_empty() {
            let data = self.run.split().freeze();
            self.done.push(MediaChunk::Bytes { data, random_access: std::mem::take(&mut self.run_random_access) });
        }
    }

    /// Whether a decoder can join at this packet: the start of a video PES at a keyframe (or of an
    /// audio PES when there is no video), once the tables are known.
    fn joinable(&self, h: Header, pl: &[u8]) -> bool {
        if !h.start || self.pat.is_none() || self.pmt.is_none() {
            return false;
        }
        match self.program.video_pid {
            Some(v) if v == h.pid => {
                h.random_access
                    || pes_payload(pl).is_some_and(|es| joinable_nal(es, self.program.video_codec == "HEVC"))
            }
            Some(_) => false,
            None => self.program.audio_pid == Some(h.pid),
        }
    }

    fn table(&mut self, h: Header, pl: &[u8]) {
        if !h.start {
            return;
        }
        match section(pl) {
            Some((0x00, body)) if h.pid == PID_PAT => {
                if let Some(pmt) = parse_pat(body) {
                    if self.pmt_pid != Some(pmt) {
                        self.pmt_pid = Some(pmt);
                        self.pmt = None;
                    }
                }
            }
            Some((0x02, body)) => {
                let mut program = Program { encoder: self.program.encoder.clone(), ..Program::default() };
                if parse_pmt(body, &mut program).is_some() && program != self.program {
                    self.program = program;
                    self.program_changed = true;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet of `pid` carrying `payload` (padded with an adaptation field of stuffing).
    fn packet(pid: u16, start: bool, rai: bool, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![SYNC, ((pid >> 8) as u8 & 0x1f) | if start { 0x40 } else { 0 }, pid as u8];
        let room = PACKET - 4 - payload.len();
        if room == 0 && !rai {
            p.push(0x10);
        } else {
            p.push(0x30);
            let af_len = room - 1;
            p.push(af_len as u8);
            if af_len > 0 {
                p.push(if rai { 0x40 } else { 0 });
                p.extend(std::iter::repeat_n(0xff, af_len - 1));
            }
        }
        p.extend_from_slice(payload);
        assert_eq!(p.len(), PACKET);
        p
    }

    /// A one-packet section: pointer field, header, body, fake CRC.
    fn section_payload(table_id: u8, body: &[u8]) -> Vec<u8> {
        let len = 5 + body.len() + 4;
        let mut s = vec![0, table_id, 0xb0 | (len >> 8) as u8, len as u8, 0, 1, 0xc1, 0, 0];
        s.extend_from_slice(body);
        s.extend_from_slice(&[0, 0, 0, 0]);
        s
    }

    fn pat() -> Vec<u8> {
        packet(0, true, false, &section_payload(0, &[0, 1, 0xf0, 0x00]))
    }

    fn pmt() -> Vec<u8> {
        // PCR PID 0x100, no program info; H.264 on 0x100, AAC on 0x101.
        let body = [0xe1, 0x00, 0xf0, 0x00, 0x1b, 0xe1, 0x00, 0xf0, 0x00, 0x0f, 0xe1, 0x01, 0xf0, 0x00];
        packet(0x1000, true, false, &section_payload(2, &body))
    }

    fn sdt() -> Vec<u8> {
        let desc = [&[0x48u8, 11, 0x01, 3][..], b"OBS", &[5], b"Scene"].concat();
        let mut body = vec![0xff, 0x01, 0xff, 0, 1, 0xfc, 0x80, desc.len() as u8];
        body.extend_from_slice(&desc);
        packet(0x11, true, false, &section_payload(0x42, &body))
    }

    fn pes(pid: u16, rai: bool, nal: u8) -> Vec<u8> {
        packet(
            pid,
            true,
            rai,
            &[0, 0, 1, 0xe0, 0, 0, 0x80, 0x80, 5, 0x21, 0, 1, 0, 1, 0, 0, 0, 1, 0x09, 0xf0, 0, 0, 1, nal],
        )
    }

    #[test]
    fn framer_resyncs_and_reassembles() {
        let p = pat();
        let mut stream = vec![1, 2, 3];
        stream.extend_from_slice(&p);
        stream.extend_from_slice(&p);
        let mut f = Framer::default();
        let mut n = 0;
        for piece in stream.chunks(100) {
            f.push(piece, |pk| {
                assert_eq!(pk, &p[..]);
                n += 1;
            });
        }
        assert_eq!(n, 2);
    }

    #[test]
    fn tables_codecs_and_encoder() {
        let mut d = Demux::default();
        d.packet(&pat());
        d.packet(&pmt());
        d.packet(&sdt());
        let prog = d.take_program_change().expect("program learnt");
        assert_eq!(prog.video_pid, Some(0x100));
        assert_eq!(prog.video_codec, "H.264");
        assert_eq!(prog.audio_pid, Some(0x101));
        assert_eq!(prog.audio_codec, "AAC");
        assert_eq!(prog.encoder, "OBS Scene");
        assert!(d.take_program_change().is_none());
    }

    #[test]
    fn random_access_runs_start_with_the_tables() {
        let mut d = Demux::default();
        // Before the tables: not joinable.
        d.packet(&pes(0x100, true, 5));
        d.packet(&pat());
        d.packet(&pmt());
        d.packet(&pes(0x101, false, 0));
        d.packet(&pes(0x100, false, 1)); // a P frame
        d.packet(&pes(0x100, true, 1)); // the random-access indicator
        d.packet(&packet(0x100, false, false, &[0; 184]));
        let chunks = d.take_chunks();
        let flags: Vec<(usize, bool)> = chunks
            .iter()
            .map(|c| match c {
                MediaChunk::Bytes { data, random_access } => (data.len() / PACKET, *random_access),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(flags, vec![(5, false), (4, true)]);
        let MediaChunk::Bytes { data, .. } = &chunks[1] else { unreachable!() };
        assert_eq!(&data[..PACKET], &pat()[..], "the PAT first");
        assert_eq!(&data[PACKET..2 * PACKET], &pmt()[..], "then the PMT");
        // Tables right before a keyframe are not repeated; an IDR NAL without the flag is found.
        d.packet(&pat());
        d.packet(&pmt());
        d.packet(&pes(0x100, false, 0x65));
        let chunks = d.take_chunks();
        assert_eq!(chunks.len(), 1);
        assert!(chunks[0].is_random_access());
        let MediaChunk::Bytes { data, .. } = &chunks[0] else { unreachable!() };
        assert_eq!(data.len(), 3 * PACKET);
    }

    #[test]
    fn garbage_is_harmless() {
        let mut d = Demux::default();
        let mut f = Framer::default();
        let mut junk = vec![SYNC; 2000];
        for (i, b) in junk.iter_mut().enumerate() {
            *b = (i * 7919 % 251) as u8;
        }
        junk[0] = SYNC;
        f.push(&junk, |p| d.packet(p));
        let mut bad = pat();
        bad[4] = 0xff; // pointer field past the end
        d.packet(&bad);
        d.packet(&[SYNC; 10]);
        let _ = d.take_chunks();
    }
}
