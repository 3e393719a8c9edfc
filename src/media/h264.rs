//! H.264 bitstream facts a protocol needs without decoding: the NAL units of an Annex B byte stream,
//! whether an access unit holds a keyframe, and the picture size and frame rate a sequence parameter
//! set declares (ITU-T H.264 7.3.2.1.1 and Annex E.1.1, the VUI timing info).
//!
//! RTMP publishers say their size and frame rate in `onMetaData`; MPEG-TS (SRT) and RTP (WHIP) carry
//! only the bitstream, so the broadcaster details come from the SPS; `media::tsmux` (WHIP) rewrites
//! access units NAL by NAL. Every read is bounds-checked: a truncated or hostile SPS gives `None`,
//! never a panic.

/// NAL unit types used here.
pub const NAL_IDR: u8 = 5;
pub const NAL_SPS: u8 = 7;
pub const NAL_PPS: u8 = 8;
pub const NAL_AUD: u8 = 9;

/// What an SPS says about the pictures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpsInfo {
    /// `profile_idc` (66 baseline, 77 main, 100 high, ...).
    pub profile: u8,
    pub width: u32,
    pub height: u32,
    /// Frames per second from the VUI timing info (`time_scale / (2 * num_units_in_tick)`), if present.
    pub framerate: Option<f64>,
}

/// The NAL units of an Annex B byte stream (start codes `00 00 01` / `00 00 00 01`), each from its
/// header byte to the next start code (empty units are skipped).
pub fn nal_units(es: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 2 < es.len() {
        if es[i] == 0 && es[i + 1] == 0 && es[i + 2] == 1 {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let mut ends: Vec<usize> = starts.iter().skip(1).map(|&s| s - 3).collect();
    ends.push(es.len());
    starts
        .into_iter()
        .zip(ends)
        .map(move |(s, mut e)| {
            // A four-byte start code leaves its leading zero on the previous unit.
            while e > s && es[e - 1] == 0 {
                e -= 1;
            }
            &es[s..e]
        })
        .filter(|n| !n.is_empty())
}

/// The type of a NAL unit (its header byte's low five bits; 0 for an empty unit).
pub fn nal_type(nal: &[u8]) -> u8 {
    nal.first().map_or(0, |b| b & 0x1f)
}

/// Whether the access unit (Annex B) holds an IDR picture.
pub fn is_keyframe(au: &[u8]) -> bool {
    nal_units(au).any(|n| nal_type(n) == NAL_IDR)
}

/// The SPS facts of the first SPS NAL unit (type 7) in an Annex B byte stream, if it parses.
pub fn find_sps(es: &[u8]) -> Option<SpsInfo> {
    nal_units(es).find(|n| nal_type(n) == NAL_SPS).and_then(parse_sps)
}

/// Parse an SPS NAL unit (with its one-byte header).
pub fn parse_sps(nal: &[u8]) -> Option<SpsInfo> {
    if nal_type(nal) != NAL_SPS {
        return None;
    }
    let rbsp = unescape(&nal[1..]);
    let mut r = Bits::new(&rbsp);
    let profile_idc = r.bits(8)?;
    r.bits(16)?; // constraint flags, reserved, level_idc
    r.ue()?; // seq_parameter_set_id
    let mut chroma_format_idc = 1;
    let mut separate_colour_plane = false;
    if matches!(profile_idc, 100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135) {
        chroma_format_idc = r.ue()?;
        if chroma_format_idc == 3 {
            separate_colour_plane = r.bit()?;
        }
        r.ue()?; // bit_depth_luma_minus8
        r.ue()?; // bit_depth_chroma_minus8
        r.bit()?; // qpprime_y_zero_transform_bypass_flag
        if r.bit()? {
            // seq_scaling_matrix_present_flag: skip the lists (7.3.2.1.1.1).
            let lists = if chroma_format_idc == 3 { 12 } else { 8 };
            for i in 0..lists {
                if r.bit()? {
                    let size = if i < 6 { 16 } else { 64 };
                    let (mut last, mut next) = (8i64, 8i64);
                    for _ in 0..size {
                        if next != 0 {
                            next = (last + r.se()? + 256) % 256;
                        }
                        if next != 0 {
                            last = next;
                        }
                    }
                }
            }
        }
    }
    r.ue()?; // log2_max_frame_num_minus4
    match r.ue()? {
        0 => {
            r.ue()?; // log2_max_pic_order_cnt_lsb_minus4
        }
        1 => {
            r.bit()?;
            r.se()?;
            r.se()?;
            let cycle = r.ue()?;
            if cycle > 255 {
                return None;
            }
            for _ in 0..cycle {
                r.se()?;
            }
        }
        _ => {}
    }
    r.ue()?; // max_num_ref_frames
    r.bit()?; // gaps_in_frame_num_value_allowed_flag
    let width_mbs = u64::from(r.ue()?) + 1;
    let height_map_units = u64::from(r.ue()?) + 1;
    let frame_mbs_only = r.bit()?;
    if !frame_mbs_only {
        r.bit()?; // mb_adaptive_frame_field_flag
    }
    r.bit()?; // direct_8x8_inference_flag
    let (mut crop_l, mut crop_r, mut crop_t, mut crop_b) = (0u64, 0u64, 0u64, 0u64);
    if r.bit()? {
        crop_l = r.ue()?.into();
        crop_r = r.ue()?.into();
        crop_t = r.ue()?.into();
        crop_b = r.ue()?.into();
    }
    let field_factor = if frame_mbs_only { 1 } else { 2 };
    let (crop_x, crop_y) = match (chroma_format_idc, separate_colour_plane) {
        (0, _) | (3, true) => (1, field_factor),
        (1, _) => (2, 2 * field_factor),
        (2, _) => (2, field_factor),
        _ => (1, field_factor),
    };
    let width = (width_mbs * 16).checked_sub(crop_x * (crop_l + crop_r))?;
    let height = (height_map_units * 16 * field_factor).checked_sub(crop_y * (crop_t + crop_b))?;
    let framerate = vui_framerate(&mut r);
    Some(SpsInfo {
        profile: profile_idc as u8,
        width: u32::try_from(width).ok()?,
        height: u32::try_from(height).ok()?,
        framerate,
    })
}

/// The frame rate from the VUI timing info, if the SPS has VUI parameters with timing.
fn vui_framerate(r: &mut Bits) -> Option<f64> {
    if !r.bit()? {
        return None; // vui_parameters_present_flag
    }
    if r.bit()? && r.bits(8)? == 255 {
        r.bits(32)?; // aspect_ratio_info: Extended_SAR width and height
    }
    if r.bit()? {
        r.bit()?; // overscan_info_present_flag -> overscan_appropriate_flag
    }
    if r.bit()? {
        r.bits(4)?; // video_format, video_full_range_flag
        if r.bit()? {
            r.bits(24)?; // colour_primaries, transfer_characteristics, matrix_coefficients
        }
    }
    if r.bit()? {
        r.ue()?; // chroma_sample_loc_type_top_field
        r.ue()?; // chroma_sample_loc_type_bottom_field
    }
    if !r.bit()? {
        return None; // timing_info_present_flag
    }
    let units = r.bits(32)?;
    let scale = r.bits(32)?;
    (units > 0 && scale > 0).then(|| f64::from(scale) / (2.0 * f64::from(units)))
}

/// The RBSP of a NAL unit payload: emulation prevention bytes (`00 00 03`) removed.
fn unescape(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut zeros = 0;
    for &b in data {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

/// An MSB-first bit reader with Exp-Golomb codes; every read is `None` past the end.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8]) -> Self {
        Bits { data, pos: 0 }
    }

    fn bit(&mut self) -> Option<bool> {
        let byte = self.data.get(self.pos / 8)?;
        let b = (byte >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        Some(b == 1)
    }

    /// `n` (≤ 32) bits as an unsigned number.
    fn bits(&mut self, n: u32) -> Option<u32> {
        let mut v = 0u64;
        for _ in 0..n {
            v = (v << 1) | u64::from(self.bit()?);
        }
        u32::try_from(v).ok()
    }

    /// ue(v): unsigned Exp-Golomb (values past 2^32 - 2 are refused).
    fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while !self.bit()? {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        let rest = self.bits(zeros)?;
        ((1u64 << zeros) - 1 + u64::from(rest)).try_into().ok()
    }

    /// se(v): signed Exp-Golomb.
    fn se(&mut self) -> Option<i64> {
        let k = i64::from(self.ue()?);
        Some(if k % 2 == 1 { (k + 1) / 2 } else { -(k / 2) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPSs x264 wrote (`ffmpeg -f lavfi -i testsrc2=size=WxH:rate=R -frames:v 1 -c:v libx264 -profile:v P`).
    const SPS_720P30_HIGH: &[u8] = &[
        0x67, 0x64, 0x00, 0x1f, 0xac, 0xd9, 0x40, 0x50, 0x05, 0xbb, 0x01, 0x10, 0x00, 0x00, 0x03, 0x00, 0x10, 0x00,
        0x00, 0x03, 0x03, 0xc0, 0xf1, 0x83, 0x19, 0x60,
    ];
    /// 1080 lines are coded as 1088 and cropped.
    const SPS_1080P25_BASELINE: &[u8] = &[
        0x67, 0x42, 0xc0, 0x28, 0xd9, 0x00, 0x78, 0x02, 0x27, 0xe5, 0xc0, 0x44, 0x00, 0x00, 0x03, 0x00, 0x04, 0x00,
        0x00, 0x03, 0x00, 0xc8, 0x3c, 0x60, 0xc9, 0x20,
    ];
    const SPS_240P60_MAIN: &[u8] = &[
        0x67, 0x4d, 0x40, 0x15, 0xec, 0xa0, 0xa0, 0xfd, 0x80, 0x88, 0x00, 0x00, 0x03, 0x00, 0x08, 0x00, 0x00, 0x03,
        0x03, 0xc0, 0x78, 0xb1, 0x6c, 0xb0,
    ];
    const SPS_720P30: &[u8] = SPS_720P30_HIGH;

    #[test]
    fn sizes_and_frame_rates_of_x264_streams() {
        let read = |sps| parse_sps(sps).map(|s| (s.width, s.height, s.framerate));
        assert_eq!(read(SPS_720P30_HIGH), Some((1280, 720, Some(30.0))));
        assert_eq!(read(SPS_1080P25_BASELINE), Some((1920, 1080, Some(25.0))));
        assert_eq!(read(SPS_240P60_MAIN), Some((320, 240, Some(60.0))));
    }

    #[test]
    fn found_in_an_annex_b_stream_after_an_access_unit_delimiter() {
        let mut es = vec![0, 0, 0, 1, 0x09, 0xf0, 0, 0, 0, 1];
        es.extend_from_slice(SPS_720P30);
        es.extend_from_slice(&[0, 0, 1, 0x68, 0xeb, 0xe3, 0xcb, 0x22, 0xc0]);
        let units: Vec<&[u8]> = nal_units(&es).collect();
        assert_eq!(units.len(), 3);
        assert_eq!(units[1], SPS_720P30);
        assert_eq!(find_sps(&es).map(|s| (s.width, s.height)), Some((1280, 720)));
    }

    #[test]
    fn baseline_640x480_and_its_profile() {
        let sps = [
            0x67, 0x42, 0xc0, 0x1e, 0xda, 0x02, 0x80, 0xf6, 0x84, 0x00, 0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0x03, 0x00,
            0xf0, 0x3c, 0x58, 0xba, 0x80,
        ];
        let s = parse_sps(&sps).expect("sps");
        assert_eq!((s.width, s.height, s.profile), (640, 480, 66));
        assert_eq!(parse_sps(SPS_720P30_HIGH).map(|s| s.profile), Some(100));
    }

    #[test]
    fn nal_units_and_keyframes() {
        let au = [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 9, 9];
        let nals: Vec<&[u8]> = nal_units(&au).collect();
        assert_eq!(nals, vec![&[0x67, 1, 2][..], &[0x68, 3][..], &[0x65, 9, 9][..]]);
        assert!(is_keyframe(&au));
        assert!(!is_keyframe(&[0, 0, 1, 0x41, 1]));
    }

    #[test]
    fn truncated_and_hostile_input_is_none() {
        for n in 0..SPS_720P30.len() - 4 {
            let _ = parse_sps(&SPS_720P30[..n]);
        }
        assert_eq!(parse_sps(&[0x67]), None);
        assert_eq!(parse_sps(&[0x67, 0x64, 0, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(parse_sps(&[0x68, 1, 2, 3]), None);
        assert_eq!(find_sps(&[0, 0, 1]), None);
    }
}
