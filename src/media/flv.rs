//! FLV framing of the RTMP media messages: the tags the ingest hands to the transcode worker, and
//! what the sequence headers say about the codecs.
//!
//! Video tags come in two forms. Legacy tags (`FrameType << 4 | CodecID`, then for AVC the
//! `AVCPacketType` and a 24-bit composition time) carry H.264. Enhanced RTMP tags (the veovera
//! "enhanced-rtmp" spec, sent by OBS 30+ and ffmpeg 6.1+) set bit 0x80 of the first byte
//! (`IsExHeader`), keep the frame type in bits 4-6 and a `PacketType` in the low nibble, and name the
//! codec by a FourCC (`hvc1`, `av01`, `vp09`, `avc1`) in the next four bytes. [`VideoTag::parse`]
//! reads both forms; `is_video_keyframe`/`is_sequence_header` answer for both.

use bytes::Bytes;

/// FLV tag types.
pub const TAG_AUDIO: u8 = 8;
pub const TAG_VIDEO: u8 = 9;
pub const TAG_SCRIPT: u8 = 18;

/// The FLV file header (audio + video present) followed by PreviousTagSize0.
pub const FLV_HEADER: [u8; 13] = [b'F', b'L', b'V', 1, 0x05, 0, 0, 0, 9, 0, 0, 0, 0];

/// One audio or video message, as it goes into an FLV tag.
#[derive(Debug, Clone)]
pub struct FlvTag {
    pub kind: u8,
    /// Milliseconds (RTMP timestamp).
    pub timestamp: u32,
    pub data: Bytes,
}

impl FlvTag {
    /// A video tag that starts a GOP (frame type 1) with a coded frame, sequence headers excluded.
    pub fn is_video_keyframe(&self) -> bool {
        self.kind == TAG_VIDEO
            && VideoTag::parse(&self.data).is_ok_and(|v| v.keyframe && v.packet == VideoPacket::CodedFrames)
    }

    /// Whether this video tag is an Enhanced RTMP one (`IsExHeader`).
    pub fn is_enhanced_video(&self) -> bool {
        self.kind == TAG_VIDEO && self.data.first().is_some_and(|b| b & EX_HEADER != 0)
    }

    /// A video decoder configuration record (AVC, or an Enhanced RTMP `SequenceStart`) or an AAC
    /// AudioSpecificConfig.
    pub fn is_sequence_header(&self) -> bool {
        match self.kind {
            TAG_VIDEO => VideoTag::parse(&self.data).is_ok_and(|v| v.packet == VideoPacket::SequenceStart),
            TAG_AUDIO => self.data.len() > 1 && self.data[0] >> 4 == 10 && self.data[1] == 0,
            _ => false,
        }
    }

    /// Append the tag and its PreviousTagSize to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let size = self.data.len() as u32;
        out.push(self.kind);
        out.extend_from_slice(&size.to_be_bytes()[1..]);
        out.extend_from_slice(&self.timestamp.to_be_bytes()[1..]);
        out.push((self.timestamp >> 24) as u8);
        out.extend_from_slice(&[0, 0, 0]);
        out.extend_from_slice(&self.data);
        out.extend_from_slice(&(size + 11).to_be_bytes());
    }

    /// Same tag at another time (sequence headers replayed to a restarted worker).
    pub fn at(&self, timestamp: u32) -> FlvTag {
        FlvTag { kind: self.kind, timestamp, data: self.data.clone() }
    }
}

/// `IsExHeader`: the first byte of an Enhanced RTMP video tag has this bit set.
pub const EX_HEADER: u8 = 0x80;

/// A video codec as a FourCC (Enhanced RTMP's `VideoFourCc`).
pub type FourCc = [u8; 4];
pub const FOURCC_AVC: FourCc = *b"avc1";
pub const FOURCC_HEVC: FourCc = *b"hvc1";
pub const FOURCC_AV1: FourCc = *b"av01";
pub const FOURCC_VP9: FourCc = *b"vp09";
/// The video FourCCs castd takes (it decodes them all), as `connect`'s `fourCcList` answers them.
pub const SUPPORTED_FOURCCS: [FourCc; 4] = [FOURCC_AV1, FOURCC_VP9, FOURCC_HEVC, FOURCC_AVC];

/// What a video tag carries (legacy AVC packet types map onto the Enhanced RTMP ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoPacket {
    /// The decoder configuration record (avcC, hvcC, av1C, vpcC).
    SequenceStart,
    /// One coded frame (access unit / temporal unit).
    CodedFrames,
    /// The end of the sequence.
    SequenceEnd,
    /// Anything else: metadata (colour info), MPEG-2 TS sequence start, a video command frame,
    /// multitrack or ModEx packets, which castd passes on but does not decode.
    Other,
}

/// Why a video tag cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VideoTagError {
    #[error("truncated video tag")]
    Truncated,
}

/// One video tag, read (the payload borrowed from the tag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoTag<'a> {
    /// The codec: the Enhanced RTMP FourCC, or for a legacy tag `avc1` (codec id 7) or the legacy id
    /// in the first byte (`[0, 0, 0, id]`) for another legacy codec.
    pub fourcc: FourCc,
    pub enhanced: bool,
    /// Frame type 1 (a keyframe).
    pub keyframe: bool,
    pub packet: VideoPacket,
    /// Composition time offset in milliseconds (PTS - DTS); 0 where the packet has none.
    pub composition_time: i32,
    /// The configuration record (`SequenceStart`) or the coded frame (`CodedFrames`).
    pub payload: &'a [u8],
}

fn si24(b: &[u8]) -> i32 {
    let v = (i32::from(b[0]) << 16) | (i32::from(b[1]) << 8) | i32::from(b[2]);
    (v << 8) >> 8
}

impl<'a> VideoTag<'a> {
    /// Read a video tag's header, legacy or enhanced.
    pub fn parse(data: &'a [u8]) -> Result<VideoTag<'a>, VideoTagError> {
        let first = *data.first().ok_or(VideoTagError::Truncated)?;
        if first & EX_HEADER == 0 {
            let keyframe = first >> 4 == 1;
            let id = first & 0x0f;
            if id != 7 {
                let packet = VideoPacket::CodedFrames;
                return Ok(VideoTag {
                    fourcc: [0, 0, 0, id],
                    enhanced: false,
                    keyframe,
                    packet,
                    composition_time: 0,
                    payload: &data[1..],
                });
            }
            // (Short AVC tags are read as before: packet type only.)
            if data.len() < 2 {
                return Err(VideoTagError::Truncated);
            }
            let packet = match data[1] {
                0 => VideoPacket::SequenceStart,
                1 => VideoPacket::CodedFrames,
                2 => VideoPacket::SequenceEnd,
                _ => VideoPacket::Other,
            };
            return Ok(VideoTag {
                fourcc: FOURCC_AVC,
                enhanced: false,
                keyframe,
                packet,
                composition_time: data.get(2..5).map(si24).unwrap_or(0),
                payload: data.get(5..).unwrap_or(&[]),
            });
        }
        if data.len() < 5 {
            return Err(VideoTagError::Truncated);
        }
        let frame_type = (first >> 4) & 0x07;
        let packet_type = first & 0x0f;
        let fourcc: FourCc = [data[1], data[2], data[3], data[4]];
        let rest = &data[5..];
        // A video command frame (frame type 5) carries a one-byte command, not media.
        let (packet, composition_time, payload) = match packet_type {
            _ if frame_type == 5 && packet_type != 4 => (VideoPacket::Other, 0, rest),
            0 => (VideoPacket::SequenceStart, 0, rest),
            // CodedFrames: AVC and HEVC carry a composition time first; AV1 and VP9 do not.
            1 if fourcc == FOURCC_AVC || fourcc == FOURCC_HEVC => {
                if rest.len() < 3 {
                    return Err(VideoTagError::Truncated);
                }
                (VideoPacket::CodedFrames, si24(&rest[..3]), &rest[3..])
            }
            1 => (VideoPacket::CodedFrames, 0, rest),
            2 => (VideoPacket::SequenceEnd, 0, rest),
            // CodedFramesX: composition time implied zero.
            3 => (VideoPacket::CodedFrames, 0, rest),
            _ => (VideoPacket::Other, 0, rest),
        };
        Ok(VideoTag { fourcc, enhanced: true, keyframe: frame_type == 1, packet, composition_time, payload })
    }

    /// The codec's name as the broadcaster details show it.
    pub fn codec_name(&self) -> &'static str {
        fourcc_name(self.fourcc)
    }
}

/// The name of a video FourCC (or of a legacy codec id in `[0, 0, 0, id]`).
pub fn fourcc_name(fourcc: FourCc) -> &'static str {
    match &fourcc {
        b"avc1" => "H.264",
        b"hvc1" => "hevc",
        b"av01" => "av1",
        b"vp09" => "vp9",
        [0, 0, 0, id] => video_codec_name(*id),
        _ => "unknown",
    }
}

/// The FourCC a number in `onMetaData`'s `videocodecid` stands for, when it is one (Enhanced RTMP
/// sends the FourCC as a big-endian 32-bit number; legacy encoders send the FLV codec id).
pub fn metadata_video_codec(id: u32) -> &'static str {
    if id > 0xff {
        fourcc_name(id.to_be_bytes())
    } else {
        video_codec_name(id as u8)
    }
}

/// Printable form of a FourCC for messages.
pub fn fourcc_str(fourcc: FourCc) -> String {
    fourcc.iter().map(|&b| if b.is_ascii_graphic() { b as char } else { '?' }).collect()
}

/// Name of an FLV video codec id.
pub fn video_codec_name(id: u8) -> &'static str {
    match id {
        2 => "H.263",
        4 => "VP6",
        7 => "H.264",
        12 => "HEVC",
        _ => "unknown",
    }
}

/// Name of an FLV audio format id.
pub fn audio_codec_name(id: u8) -> &'static str {
    match id {
        2 => "MP3",
        10 => "AAC",
        11 => "Speex",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_layout() {
        let t = FlvTag { kind: TAG_VIDEO, timestamp: 0x0102_0304, data: Bytes::from_static(&[0x17, 0, 0, 0, 0]) };
        assert!(t.is_sequence_header());
        assert!(!t.is_video_keyframe());
        let mut out = Vec::new();
        t.write_to(&mut out);
        assert_eq!(out.len(), 11 + 5 + 4);
        assert_eq!(&out[..8], &[9, 0, 0, 5, 0x02, 0x03, 0x04, 0x01]);
        assert_eq!(&out[16..], &16u32.to_be_bytes());
        let k = FlvTag { kind: TAG_VIDEO, timestamp: 0, data: Bytes::from_static(&[0x17, 1, 0, 0, 0]) };
        assert!(k.is_video_keyframe());
    }

    fn video(data: &[u8]) -> FlvTag {
        FlvTag { kind: TAG_VIDEO, timestamp: 0, data: Bytes::copy_from_slice(data) }
    }

    #[test]
    fn legacy_avc_is_read_as_before() {
        let v = VideoTag::parse(&[0x27, 1, 0xff, 0xff, 0xfe, 9, 9]).unwrap();
        assert_eq!((v.fourcc, v.enhanced, v.keyframe), (FOURCC_AVC, false, false));
        assert_eq!((v.packet, v.composition_time, v.payload), (VideoPacket::CodedFrames, -2, &[9u8, 9][..]));
        assert_eq!(VideoTag::parse(&[0x17, 2, 0, 0, 0]).unwrap().packet, VideoPacket::SequenceEnd);
        assert_eq!(VideoTag::parse(&[0x17]), Err(VideoTagError::Truncated));
        assert!(video(&[0x17, 0]).is_sequence_header(), "a short AVC sequence header, as before");
        assert_eq!(VideoTag::parse(&[]), Err(VideoTagError::Truncated));
        // A legacy codec other than AVC keeps its id.
        assert_eq!(VideoTag::parse(&[0x12, 1]).unwrap().codec_name(), "H.263");
    }

    #[test]
    fn enhanced_sequence_start_and_end() {
        // Keyframe (1), SequenceStart (0), hvc1, then the hvcC record.
        let hvcc = [0x80 | 0x10, b'h', b'v', b'c', b'1', 1, 2, 3];
        let v = VideoTag::parse(&hvcc).unwrap();
        assert_eq!(
            (v.fourcc, v.enhanced, v.packet, v.payload),
            (FOURCC_HEVC, true, VideoPacket::SequenceStart, &[1u8, 2, 3][..])
        );
        assert_eq!(v.codec_name(), "hevc");
        let tag = video(&hvcc);
        assert!(tag.is_sequence_header() && tag.is_enhanced_video() && !tag.is_video_keyframe());
        // AV1's av1C.
        let av1c = [0x90, b'a', b'v', b'0', b'1', 0x81, 0x08, 0x0c, 0x00];
        let v = VideoTag::parse(&av1c).unwrap();
        assert_eq!((v.fourcc, v.packet, v.payload.len()), (FOURCC_AV1, VideoPacket::SequenceStart, 4));
        assert_eq!(v.codec_name(), "av1");
        // SequenceEnd (2).
        let end = VideoTag::parse(&[0x92, b'h', b'v', b'c', b'1']).unwrap();
        assert_eq!((end.packet, end.payload.len()), (VideoPacket::SequenceEnd, 0));
        assert!(!video(&[0x92, b'h', b'v', b'c', b'1']).is_sequence_header());
        assert_eq!(VideoTag::parse(&[0x90, b'h', b'v']), Err(VideoTagError::Truncated));
    }

    #[test]
    fn enhanced_coded_frames_with_and_without_composition_time() {
        // HEVC CodedFrames (1): SI24 composition time 0x000021 = 33 ms.
        let k = [0x91, b'h', b'v', b'c', b'1', 0, 0, 0x21, 0, 0, 0, 1, 0x26];
        let v = VideoTag::parse(&k).unwrap();
        assert_eq!((v.packet, v.keyframe, v.composition_time), (VideoPacket::CodedFrames, true, 33));
        assert_eq!(v.payload, &[0, 0, 0, 1, 0x26]);
        assert!(video(&k).is_video_keyframe());
        // A negative composition time.
        let v = VideoTag::parse(&[0xa1, b'h', b'v', b'c', b'1', 0xff, 0xff, 0xdf, 7]).unwrap();
        assert_eq!((v.keyframe, v.composition_time, v.payload), (false, -33, &[7u8][..]));
        assert!(!video(&[0xa1, b'h', b'v', b'c', b'1', 0xff, 0xff, 0xdf, 7]).is_video_keyframe());
        // CodedFramesX (3): no composition time field.
        let v = VideoTag::parse(&[0xa3, b'h', b'v', b'c', b'1', 5, 6]).unwrap();
        assert_eq!((v.packet, v.composition_time, v.payload), (VideoPacket::CodedFrames, 0, &[5u8, 6][..]));
        // AV1 and VP9 CodedFrames carry no composition time either.
        let v = VideoTag::parse(&[0x91, b'a', b'v', b'0', b'1', 0x12, 0x00]).unwrap();
        assert_eq!((v.fourcc, v.composition_time, v.payload), (FOURCC_AV1, 0, &[0x12u8, 0][..]));
        let v = VideoTag::parse(&[0xa1, b'v', b'p', b'0', b'9', 0x86]).unwrap();
        assert_eq!((v.codec_name(), v.keyframe, v.payload), ("vp9", false, &[0x86u8][..]));
        // Truncated composition time.
        assert_eq!(VideoTag::parse(&[0x91, b'h', b'v', b'c', b'1', 0]), Err(VideoTagError::Truncated));
        // Metadata (4) and a command frame (type 5) are not media.
        assert_eq!(VideoTag::parse(&[0x94, b'h', b'v', b'c', b'1', 2]).unwrap().packet, VideoPacket::Other);
        assert_eq!(VideoTag::parse(&[0xd1, b'h', b'v', b'c', b'1', 0]).unwrap().packet, VideoPacket::Other);
    }

    #[test]
    fn metadata_codec_ids() {
        assert_eq!(metadata_video_codec(7), "H.264");
        assert_eq!(metadata_video_codec(u32::from_be_bytes(*b"hvc1")), "hevc");
        assert_eq!(metadata_video_codec(u32::from_be_bytes(*b"av01")), "av1");
        assert_eq!(fourcc_str(*b"xy\0z"), "xy?z");
    }
}
