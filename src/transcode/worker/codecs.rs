//! Codec strings for the master playlist's `CODECS` attribute: `avc1.PPCCLL` read from an H.264 SPS,
//! found in an Annex-B packet (encoded variants) or in the input's avcC extradata (passthrough); for a
//! passthrough of an Enhanced RTMP source, `hvc1.…` from its hvcC (ISO/IEC 14496-15 annex E) and
//! `av01.…` from its av1C (the AV1 ISOBMFF binding's codecs parameter).

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

/// `hvc1.…` from an HEVCDecoderConfigurationRecord: profile space and idc, the compatibility flags
/// (bit-reversed, hex), tier and level, the constraint bytes (trailing zero bytes left out).
pub fn codec_from_hvcc(hvcc: &[u8]) -> Option<String> {
    if hvcc.len() < 13 || hvcc[0] != 1 {
        return None;
    }
    let space = ["", "A", "B", "C"][usize::from(hvcc[1] >> 6)];
    let tier = if hvcc[1] & 0x20 != 0 { 'H' } else { 'L' };
    let profile = hvcc[1] & 0x1f;
    let compat = u32::from_be_bytes([hvcc[2], hvcc[3], hvcc[4], hvcc[5]]).reverse_bits();
    let mut s = format!("hvc1.{space}{profile}.{compat:X}.{tier}{}", hvcc[12]);
    let constraints = &hvcc[6..12];
    let used = constraints.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    for b in &constraints[..used] {
        s.push_str(&format!(".{b:X}"));
    }
    Some(s)
}

/// `av01.P.LLT.DD` from an AV1CodecConfigurationRecord: profile, level and tier, bit depth.
pub fn codec_from_av1c(av1c: &[u8]) -> Option<String> {
    if av1c.len() < 4 || av1c[0] != 0x81 {
        return None;
    }
    let profile = av1c[1] >> 5;
    let level = av1c[1] & 0x1f;
    let tier = if av1c[2] & 0x80 != 0 { 'H' } else { 'M' };
    let depth = match (av1c[2] & 0x40 != 0, av1c[2] & 0x20 != 0) {
        (true, true) => 12,
        (true, false) => 10,
        _ => 8,
    };
    Some(format!("av01.{profile}.{level:02}{tier}.{depth:02}"))
}

/// `vp09.PP.LL.08` for VP9 (the input carries no vpcC: the level is the lowest whose picture size
/// holds `width`×`height`; 8-bit, as castd's passthrough of a VP9 source is).
pub fn codec_vp9(profile: i32, width: u32, height: u32) -> String {
    let area = u64::from(width) * u64::from(height);
    let level = match area {
        0..=36_864 => 10,
        36_865..=122_880 => 20,
        122_881..=245_760 => 21,
        245_761..=552_960 => 30,
        552_961..=983_040 => 31,
        983_041..=2_228_224 => 41,
        2_228_225..=8_912_896 => 51,
        _ => 61,
    };
    format!("vp09.{:02}.{level}.08", profile.clamp(0, 3))
}

/// The `CODECS` entry of a passthrough variant from the input's extradata: `avc1.…` (avcC or Annex B),
/// `hvc1.…` (hvcC) or `av01.…` (av1C); `vp09.…` from the stream's profile and size.
pub(super) fn codec_from_avcc(par: &codec::Parameters) -> Option<String> {
    if par.id() == codec::Id::VP9 {
        // SAFETY: reading plain fields of the parameters we borrow.
        let (profile, w, h) = unsafe {
            let p = par.as_ptr();
            ((*p).profile, (*p).width, (*p).height)
        };
        return Some(codec_vp9(profile, w.max(0) as u32, h.max(0) as u32));
    }
    // SAFETY: extradata/extradata_size describe a buffer owned by the parameters we borrow.
    let extra = unsafe {
        let p = par.as_ptr();
        if (*p).extradata.is_null() || (*p).extradata_size < 4 {
            return None;
        }
        std::slice::from_raw_parts((*p).extradata, (*p).extradata_size as usize)
    };
    match par.id() {
        codec::Id::HEVC => codec_from_hvcc(extra),
        codec::Id::AV1 => codec_from_av1c(extra),
        _ if extra[0] == 1 => Some(avc1(extra[1], extra[2], extra[3])),
        _ => codec_from_annexb(extra),
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

    #[test]
    fn hevc_codec_strings() {
        // Main profile (1), compatibility flags 0x60000000, constraint byte 0xb0, level 93 (3.1), Main tier.
        let mut hvcc = [0u8; 23];
        hvcc[..13].copy_from_slice(&[1, 0x01, 0x60, 0, 0, 0, 0xb0, 0, 0, 0, 0, 0, 93]);
        assert_eq!(codec_from_hvcc(&hvcc).as_deref(), Some("hvc1.1.6.L93.B0"));
        // Main 10 (2), flags 0x20000000, High tier, level 120, no constraint bytes.
        hvcc[..13].copy_from_slice(&[1, 0x22, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 120]);
        assert_eq!(codec_from_hvcc(&hvcc).as_deref(), Some("hvc1.2.4.H120"));
        assert_eq!(codec_from_hvcc(&[1, 2, 3]), None);
        assert_eq!(codec_from_hvcc(&[0; 23]), None, "not an hvcC (version 0)");
    }

    #[test]
    fn vp9_codec_strings() {
        assert_eq!(codec_vp9(0, 640, 360), "vp09.00.21.08");
        assert_eq!(codec_vp9(0, 1280, 720), "vp09.00.31.08");
        assert_eq!(codec_vp9(-99, 1920, 1080), "vp09.00.41.08", "an unknown profile is 0");
        assert_eq!(codec_vp9(2, 3840, 2160), "vp09.02.51.08");
    }

    #[test]
    fn av1_codec_strings() {
        // Main profile (0), level 8 (4.0), Main tier, 8-bit 4:2:0.
        assert_eq!(codec_from_av1c(&[0x81, 0x08, 0x0c, 0]).as_deref(), Some("av01.0.08M.08"));
        // High profile (1), level 13, High tier, 10-bit.
        assert_eq!(codec_from_av1c(&[0x81, 0x2d, 0xc0, 0]).as_deref(), Some("av01.1.13H.10"));
        assert_eq!(codec_from_av1c(&[0x80, 0x08, 0x0c, 0]), None);
    }
}
