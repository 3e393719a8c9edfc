//! FLV framing of the RTMP media messages: the tags the ingest hands to the transcode worker, and
//! what the sequence headers say about the codecs.

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
    /// A video tag that starts a GOP (frame type 1), sequence headers excluded.
    pub fn is_video_keyframe(&self) -> bool {
        self.kind == TAG_VIDEO && self.data.len() > 1 && self.data[0] >> 4 == 1 && !self.is_sequence_header()
    }

    /// An AVC decoder configuration record or an AAC AudioSpecificConfig.
    pub fn is_sequence_header(&self) -> bool {
        match self.kind {
            TAG_VIDEO => self.data.len() > 1 && self.data[0] & 0x0f == 7 && self.data[1] == 0,
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
}
