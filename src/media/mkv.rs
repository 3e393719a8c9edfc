//! A live Matroska writer for the transcode worker's input when the RTMP publisher sends Enhanced
//! RTMP video (HEVC, AV1, VP9, or H.264 with a FourCC header).
//!
//! Why Matroska: the worker demuxes with Debian 12's libavformat 5.1, whose `flv` demuxer reads no
//! Enhanced RTMP tags, and whose `mpegts` demuxer reads HEVC but not AV1 or VP9. Its `matroska`
//! demuxer reads all of them, and takes the codec configuration records the publisher sends as they
//! are (hvcC, av1C, avcC as `CodecPrivate`; the coded frames in the same length-prefixed / OBU form),
//! so nothing is rewritten but the framing. Audio stays legacy FLV AAC (what OBS and ffmpeg send with
//! Enhanced RTMP video); other audio formats are left out of the worker's input.
//!
//! Layout: the EBML header, a Segment of unknown size (a live stream), Info (1 ms timestamps),
//! Tracks (video 1, AAC audio 2), then one Cluster per frame, each of known size with one
//! SimpleBlock at the cluster's timestamp (the presentation time: decode time plus the composition
//! offset). A worker starts at a keyframe with a fresh header (`MkvWriter::start`), as the FLV path
//! does.

use super::flv::{
    FlvTag, VideoPacket, VideoTag, FOURCC_AV1, FOURCC_AVC, FOURCC_HEVC, FOURCC_VP9, TAG_AUDIO, TAG_VIDEO,
};

const EBML: u32 = 0x1A45_DFA3;
const SEGMENT: u32 = 0x1853_8067;
const INFO: u32 = 0x1549_A966;
const TIMESTAMP_SCALE: u32 = 0x2A_D7B1;
const MUXING_APP: u32 = 0x4D80;
const WRITING_APP: u32 = 0x5741;
const TRACKS: u32 = 0x1654_AE6B;
const TRACK_ENTRY: u32 = 0xAE;
const TRACK_NUMBER: u32 = 0xD7;
const TRACK_UID: u32 = 0x73C5;
const TRACK_TYPE: u32 = 0x83;
const CODEC_ID: u32 = 0x86;
const CODEC_PRIVATE: u32 = 0x63A2;
const AUDIO: u32 = 0xE1;
const SAMPLING_FREQUENCY: u32 = 0xB5;
const CHANNELS: u32 = 0x9F;
const CLUSTER: u32 = 0x1F43_B675;
const CLUSTER_TIMESTAMP: u32 = 0xE7;
const SIMPLE_BLOCK: u32 = 0xA3;

const VIDEO_TRACK: u8 = 1;
const AUDIO_TRACK: u8 = 2;

/// Why no Matroska stream can be made of the set-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MkvError {
    #[error("the video sequence header cannot be read")]
    BadVideoSetup,
    #[error("video codec {0} cannot be wrapped in Matroska")]
    UnsupportedVideo(String),
}

fn write_id(id: u32, out: &mut Vec<u8>) {
    let bytes = id.to_be_bytes();
    let skip = bytes.iter().take_while(|&&b| b == 0).count().min(3);
    out.extend_from_slice(&bytes[skip..]);
}

/// An EBML size as the shortest variable-length integer.
fn write_size(size: u64, out: &mut Vec<u8>) {
    let mut len = 1;
    while len < 8 && size >= (1u64 << (7 * len)) - 1 {
        len += 1;
    }
    let marked = size | (1u64 << (7 * len));
    out.extend_from_slice(&marked.to_be_bytes()[8 - len..]);
}

fn element(id: u32, body: &[u8], out: &mut Vec<u8>) {
    write_id(id, out);
    write_size(body.len() as u64, out);
    out.extend_from_slice(body);
}

fn uint(id: u32, v: u64, out: &mut Vec<u8>) {
    let bytes = v.to_be_bytes();
    let skip = bytes.iter().take_while(|&&b| b == 0).count().min(7);
    element(id, &bytes[skip..], out);
}

fn float(id: u32, v: f64, out: &mut Vec<u8>) {
    element(id, &v.to_be_bytes(), out);
}

/// Sampling rate and channels of an AAC AudioSpecificConfig (object type, frequency index, channel
/// configuration); `None` when it cannot be read.
pub fn aac_config(asc: &[u8]) -> Option<(f64, u8)> {
    const RATES: [u32; 13] = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];
    if asc.len() < 2 {
        return None;
    }
    let index = ((asc[0] & 0x07) << 1) | (asc[1] >> 7);
    let channels = (asc[1] >> 3) & 0x0f;
    let rate = if index == 15 {
        // An explicit 24-bit rate follows.
        if asc.len() < 5 {
            return None;
        }
        (u32::from(asc[1] & 0x7f) << 17) | (u32::from(asc[2]) << 9) | (u32::from(asc[3]) << 1) | u32::from(asc[4] >> 7)
    } else {
        *RATES.get(usize::from(index))?
    };
    Some((f64::from(rate), channels.max(1)))
}

/// The AAC AudioSpecificConfig of an FLV audio sequence header, if it is one.
fn aac_setup(tag: &FlvTag) -> Option<&[u8]> {
    (tag.kind == TAG_AUDIO && tag.data.len() > 2 && tag.data[0] >> 4 == 10 && tag.data[1] == 0).then(|| &tag.data[2..])
}

/// The state of one worker's Matroska input.
#[derive(Debug)]
pub struct MkvWriter {
    audio: bool,
}

impl MkvWriter {
    /// Start a stream: the header with the tracks of `video` (a video sequence header, enhanced or
    /// AVC) and `audio` (an AAC sequence header; none, or another format: no audio track).
    pub fn start(video: &FlvTag, audio: Option<&FlvTag>, out: &mut Vec<u8>) -> Result<MkvWriter, MkvError> {
        let v = VideoTag::parse(&video.data).map_err(|_| MkvError::BadVideoSetup)?;
        if video.kind != TAG_VIDEO || v.packet != VideoPacket::SequenceStart {
            return Err(MkvError::BadVideoSetup);
        }
        let (codec, private) = match v.fourcc {
            FOURCC_HEVC => ("V_MPEGH/ISO/HEVC", Some(v.payload)),
            FOURCC_AV1 => ("V_AV1", Some(v.payload)),
            FOURCC_AVC => ("V_MPEG4/ISO/AVC", Some(v.payload)),
            // The vpcC box is not Matroska's VP9 CodecPrivate (optional; the frames say it all).
            FOURCC_VP9 => ("V_VP9", None),
            other => return Err(MkvError::UnsupportedVideo(super::flv::fourcc_str(other))),
        };
        let mut header = Vec::new();
        uint(0x4286, 1, &mut header); // EBMLVersion
        uint(0x42F7, 1, &mut header); // EBMLReadVersion
        uint(0x42F2, 4, &mut header); // EBMLMaxIDLength
        uint(0x42F3, 8, &mut header); // EBMLMaxSizeLength
        element(0x4282, b"matroska", &mut header); // DocType
        uint(0x4287, 4, &mut header); // DocTypeVersion
        uint(0x4285, 2, &mut header); // DocTypeReadVersion
        element(EBML, &header, out);
        write_id(SEGMENT, out);
        out.extend_from_slice(&[0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]); // unknown size
        let mut info = Vec::new();
        uint(TIMESTAMP_SCALE, 1_000_000, &mut info);
        element(MUXING_APP, b"castd", &mut info);
        element(WRITING_APP, b"castd", &mut info);
        element(INFO, &info, out);
        let mut tracks = Vec::new();
        let mut entry = Vec::new();
        uint(TRACK_NUMBER, VIDEO_TRACK.into(), &mut entry);
        uint(TRACK_UID, VIDEO_TRACK.into(), &mut entry);
        uint(TRACK_TYPE, 1, &mut entry);
        element(CODEC_ID, codec.as_bytes(), &mut entry);
        if let Some(p) = private.filter(|p| !p.is_empty()) {
            element(CODEC_PRIVATE, p, &mut entry);
        }
        element(TRACK_ENTRY, &entry, &mut tracks);
        let asc = audio.and_then(aac_setup).and_then(|asc| Some((asc, aac_config(asc)?)));
        if let Some((asc, (rate, channels))) = asc {
            let mut entry = Vec::new();
            uint(TRACK_NUMBER, AUDIO_TRACK.into(), &mut entry);
            uint(TRACK_UID, AUDIO_TRACK.into(), &mut entry);
            uint(TRACK_TYPE, 2, &mut entry);
            element(CODEC_ID, b"A_AAC", &mut entry);
            element(CODEC_PRIVATE, asc, &mut entry);
            let mut a = Vec::new();
            float(SAMPLING_FREQUENCY, rate, &mut a);
            uint(CHANNELS, channels.into(), &mut a);
            element(AUDIO, &a, &mut entry);
            element(TRACK_ENTRY, &entry, &mut tracks);
        }
        element(TRACKS, &tracks, out);
        Ok(MkvWriter { audio: asc.is_some() })
    }

    /// Append the frame of `tag` (a coded video frame, or an AAC frame when there is an audio track)
    /// as a cluster; set-up, sequence ends and other tags are left out.
    pub fn write(&mut self, tag: &FlvTag, out: &mut Vec<u8>) {
        let (track, keyframe, pts, payload) = match tag.kind {
            TAG_VIDEO => {
                let Ok(v) = VideoTag::parse(&tag.data) else { return };
                if v.packet != VideoPacket::CodedFrames || v.payload.is_empty() {
                    return;
                }
                let pts = (i64::from(tag.timestamp) + i64::from(v.composition_time)).max(0);
                (VIDEO_TRACK, v.keyframe, pts as u64, v.payload)
            }
            TAG_AUDIO if self.audio => {
                if tag.data.len() < 3 || tag.data[0] >> 4 != 10 || tag.data[1] != 1 {
                    return;
                }
                (AUDIO_TRACK, true, u64::from(tag.timestamp), &tag.data[2..])
            }
            _ => return,
        };
        let mut block = Vec::with_capacity(payload.len() + 4);
        block.push(0x80 | track); // track number as a one-byte vint
        block.extend_from_slice(&0i16.to_be_bytes()); // at the cluster's timestamp
        block.push(if keyframe { 0x80 } else { 0 });
        block.extend_from_slice(payload);
        let mut cluster = Vec::with_capacity(block.len() + 16);
        uint(CLUSTER_TIMESTAMP, pts, &mut cluster);
        element(SIMPLE_BLOCK, &block, &mut cluster);
        element(CLUSTER, &cluster, out);
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn tag(kind: u8, timestamp: u32, data: &[u8]) -> FlvTag {
        FlvTag { kind, timestamp, data: Bytes::copy_from_slice(data) }
    }

    /// Publisher bytes never make the parser or the writer panic (also fuzzed, `fuzz/targets.rs` rtmp).
    #[test]
    fn arbitrary_tags_are_refused_or_written_never_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..50_000 {
            let len = (next() % 24) as usize;
            let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Often an enhanced header with a known FourCC, so the parser gets past the first bytes.
            if len > 5 && next() % 2 == 0 {
                data[0] = 0x80 | (data[0] & 0x7f);
                let fourccs: [&[u8; 4]; 4] = [b"hvc1", b"av01", b"vp09", b"avc1"];
                data[1..5].copy_from_slice(fourccs[(next() % 4) as usize]);
            }
            let video = tag(TAG_VIDEO, next() as u32, &data);
            let audio = tag(TAG_AUDIO, next() as u32, &data);
            let mut out = Vec::new();
            if let Ok(mut w) = MkvWriter::start(&video, Some(&audio), &mut out) {
                w.write(&video, &mut out);
                w.write(&audio, &mut out);
            }
            let _ = aac_config(&data);
        }
    }

    #[test]
    fn ebml_sizes() {
        let mut out = Vec::new();
        write_size(5, &mut out);
        write_size(126, &mut out);
        write_size(127, &mut out);
        write_size(300, &mut out);
        assert_eq!(out, [0x85, 0xfe, 0x40, 0x7f, 0x41, 0x2c], "all ones (0xff) is reserved");
        let mut out = Vec::new();
        write_id(CLUSTER, &mut out);
        write_id(TRACK_ENTRY, &mut out);
        assert_eq!(out, [0x1f, 0x43, 0xb6, 0x75, 0xae]);
    }

    #[test]
    fn aac_config_is_read() {
        // AAC-LC, 48 kHz (index 3), stereo.
        assert_eq!(aac_config(&[0x11, 0x90]), Some((48000.0, 2)));
        // 44.1 kHz (index 4), mono.
        assert_eq!(aac_config(&[0x12, 0x08]), Some((44100.0, 1)));
        assert_eq!(aac_config(&[0x12]), None);
    }

    #[test]
    fn header_and_frames() {
        let hvcc = tag(TAG_VIDEO, 0, &[0x90, b'h', b'v', b'c', b'1', 1, 2, 3]);
        let aac = tag(TAG_AUDIO, 0, &[0xaf, 0, 0x11, 0x90]);
        let mut out = Vec::new();
        let mut w = MkvWriter::start(&hvcc, Some(&aac), &mut out).unwrap();
        assert!(out.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]));
        let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
        assert!(has(&out, b"V_MPEGH/ISO/HEVC") && has(&out, b"A_AAC"));
        assert!(has(&out, &[0x63, 0xa2, 0x83, 1, 2, 3]), "hvcC as CodecPrivate");
        let n = out.len();
        // A keyframe at 1000 ms with a 40 ms composition offset.
        w.write(&tag(TAG_VIDEO, 1000, &[0x91, b'h', b'v', b'c', b'1', 0, 0, 40, 9, 9]), &mut out);
        let cluster = &out[n..];
        assert_eq!(&cluster[..4], &[0x1f, 0x43, 0xb6, 0x75]);
        assert!(has(cluster, &[0xe7, 0x82, 0x04, 0x10]), "cluster timestamp 1040");
        assert!(has(cluster, &[0xa3, 0x86, 0x81, 0, 0, 0x80, 9, 9]), "keyframe block of track 1");
        let n = out.len();
        w.write(&tag(TAG_AUDIO, 1010, &[0xaf, 1, 7]), &mut out);
        assert!(has(&out[n..], &[0xa3, 0x85, 0x82, 0, 0, 0x80, 7]), "audio block of track 2");
        let n = out.len();
        // Set-up, sequence end and non-AAC audio add nothing.
        w.write(&hvcc, &mut out);
        w.write(&tag(TAG_VIDEO, 2000, &[0x92, b'h', b'v', b'c', b'1']), &mut out);
        w.write(&tag(TAG_AUDIO, 2000, &[0x2f, 1, 2]), &mut out);
        assert_eq!(out.len(), n);
    }

    #[test]
    fn unknown_codecs_are_refused() {
        let mut out = Vec::new();
        let x = tag(TAG_VIDEO, 0, &[0x90, b'x', b'y', b'z', b'w', 1]);
        assert_eq!(MkvWriter::start(&x, None, &mut out).unwrap_err(), MkvError::UnsupportedVideo("xyzw".into()));
        let frame = tag(TAG_VIDEO, 0, &[0x91, b'h', b'v', b'c', b'1', 0, 0, 0, 1]);
        assert_eq!(MkvWriter::start(&frame, None, &mut out).unwrap_err(), MkvError::BadVideoSetup);
    }
}
