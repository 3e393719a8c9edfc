//! Codec strings for the master playlist's `CODECS` attribute: `avc1.PPCCLL` read from an H.264 SPS,
//! found in an Annex-B packet (encoded variants) or in the input's avcC extradata (passthrough).

use ff::codec;
use ffmpeg_next as ff;

/// `avc1.PPCCLL` from an SPS NAL (the bytes after the NAL header).
fn avc1(profile: u8, compat: u8, level: u8) -> String {
    format!("avc1.{profile:02x}{compat:02x}{level:02x}")
}

/// Find the SPS in an Annex-B packet and describe it.
pub(super) fn codec_from_annexb(data: &[u8]) -> Option<String> {
    let mut i = 0;
    while i + 3 < data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            let nal = i + 3;
            if data[nal] & 0x1f == 7 && nal + 3 < data.len() {
                return Some(avc1(data[nal + 1], data[nal + 2], data[nal + 3]));
            }
            i = nal;
        } else {
            i += 1;
        }
    }
    None
}

/// `avc1.PPCCLL` from an avcC extradata record (FLV/MP4 style).
pub(super) fn codec_from_avcc(par: &codec::Parameters) -> Option<String> {
    // SAFETY: extradata/extradata_size describe a buffer owned by the parameters we borrow.
    let extra = unsafe {
        let p = par.as_ptr();
        if (*p).extradata.is_null() || (*p).extradata_size < 4 {
            return None;
        }
        std::slice::from_raw_parts((*p).extradata, (*p).extradata_size as usize)
    };
    if extra[0] == 1 {
        Some(avc1(extra[1], extra[2], extra[3]))
    } else {
        codec_from_annexb(extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_strings() {
        let sps = [0u8, 0, 0, 1, 0x67, 0x64, 0x00, 0x1f, 0xac];
        assert_eq!(codec_from_annexb(&sps).as_deref(), Some("avc1.64001f"));
        assert_eq!(codec_from_annexb(&[0, 0, 1, 0x65, 1, 2]), None);
    }
}
