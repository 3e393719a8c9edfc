//! H.264 elementary streams (Annex B), as far as the media plane needs them: the NAL units of an
//! access unit, whether it holds a keyframe, and the picture size an SPS declares (the broadcaster
//! details of a protocol that carries bare access units, such as WHIP).

/// NAL unit types used here.
pub const NAL_IDR: u8 = 5;
pub const NAL_SPS: u8 = 7;
pub const NAL_PPS: u8 = 8;
pub const NAL_AUD: u8 = 9;

/// The NAL units of an Annex-B byte stream (without their start codes).
pub fn nal_units(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 2 < data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::with_capacity(starts.len());
    for (n, &s) in starts.iter().enumerate() {
        let mut end = starts.get(n + 1).map_or(data.len(), |next| next - 3);
        // A four-byte start code leaves a zero byte before the next three-byte one.
        while end > s && data[end - 1] == 0 && starts.get(n + 1).is_some() {
            end -= 1;
        }
        if end > s {
            out.push(&data[s..end]);
        }
    }
    out.into_iter()
}

/// The type of a NAL unit (its first byte's low five bits).
pub fn nal_type(nal: &[u8]) -> u8 {
    nal.first().map_or(0, |b| b & 0x1f)
}

/// Whether the access unit holds an IDR picture.
pub fn is_keyframe(au: &[u8]) -> bool {
    nal_units(au).any(|n| nal_type(n) == NAL_IDR)
}

/// Reads bits of an RBSP (emulation-prevention bytes removed).
struct Bits {
    data: Vec<u8>,
    pos: usize,
}

impl Bits {
    fn new(nal_payload: &[u8]) -> Self {
        let mut data = Vec::with_capacity(nal_payload.len());
        let mut zeros = 0;
        for &b in nal_payload {
            if zeros >= 2 && b == 3 {
                zeros = 0;
                continue;
            }
            zeros = if b == 0 { zeros + 1 } else { 0 };
            data.push(b);
        }
        Bits { data, pos: 0 }
    }

    fn bit(&mut self) -> Option<u32> {
        let byte = *self.data.get(self.pos / 8)?;
        let b = (byte >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        Some(u32::from(b))
    }

    fn bits(&mut self, n: u32) -> Option<u32> {
        let mut v = 0;
        for _ in 0..n {
            v = (v << 1) | self.bit()?;
        }
        Some(v)
    }

    /// Unsigned Exp-Golomb.
    fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        Some((1u32 << zeros) - 1 + self.bits(zeros)?)
    }

    /// Signed Exp-Golomb.
    fn se(&mut self) -> Option<i32> {
        let k = self.ue()?;
        let v = k.div_ceil(2) as i32;
        Some(if k % 2 == 0 { -v } else { v })
    }
}

/// What an SPS says about the picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sps {
    pub profile: u8,
    pub level: u8,
    pub width: u32,
    pub height: u32,
}

/// Parse an SPS NAL unit (with its one-byte header); `None` when it is not one or is truncated.
pub fn parse_sps(nal: &[u8]) -> Option<Sps> {
    if nal_type(nal) != NAL_SPS || nal.len() < 4 {
        return None;
    }
    let profile = nal[1];
    let level = nal[3];
    let mut b = Bits::new(&nal[4..]);
    b.ue()?; // seq_parameter_set_id
    let mut chroma_format_idc = 1;
    if matches!(profile, 100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135) {
        chroma_format_idc = b.ue()?;
        if chroma_format_idc == 3 {
            b.bit()?; // separate_colour_plane_flag
        }
        b.ue()?; // bit_depth_luma_minus8
        b.ue()?; // bit_depth_chroma_minus8
        b.bit()?; // qpprime_y_zero_transform_bypass_flag
        if b.bit()? == 1 {
            let lists = if chroma_format_idc == 3 { 12 } else { 8 };
            for i in 0..lists {
                if b.bit()? == 1 {
                    let size = if i < 6 { 16 } else { 64 };
                    let (mut last, mut next) = (8i32, 8i32);
                    for _ in 0..size {
                        if next != 0 {
                            next = (last + b.se()? + 256) % 256;
                        }
                        if next != 0 {
                            last = next;
                        }
                    }
                }
            }
        }
    }
    b.ue()?; // log2_max_frame_num_minus4
    match b.ue()? {
        0 => {
            b.ue()?;
        }
        1 => {
            b.bit()?;
            b.se()?;
            b.se()?;
            let n = b.ue()?;
            for _ in 0..n.min(256) {
                b.se()?;
            }
        }
        _ => {}
    }
    b.ue()?; // max_num_ref_frames
    b.bit()?; // gaps_in_frame_num_value_allowed_flag
    let width_mbs = b.ue()? + 1;
    let height_map_units = b.ue()? + 1;
    let frame_mbs_only = b.bit()?;
    if frame_mbs_only == 0 {
        b.bit()?; // mb_adaptive_frame_field_flag
    }
    b.bit()?; // direct_8x8_inference_flag
    let (mut cl, mut cr, mut ct, mut cb) = (0, 0, 0, 0);
    if b.bit()? == 1 {
        cl = b.ue()?;
        cr = b.ue()?;
        ct = b.ue()?;
        cb = b.ue()?;
    }
    let (sub_w, sub_h) = match chroma_format_idc {
        1 => (2, 2),
        2 => (2, 1),
        _ => (1, 1),
    };
    let crop_x = if chroma_format_idc == 0 { 1 } else { sub_w };
    let crop_y = (if chroma_format_idc == 0 { 1 } else { sub_h }) * (2 - frame_mbs_only);
    let width = (width_mbs * 16).checked_sub(crop_x * (cl + cr))?;
    let height = (height_map_units * 16 * (2 - frame_mbs_only)).checked_sub(crop_y * (ct + cb))?;
    Some(Sps { profile, level, width, height })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sps_of_a_640x480_and_a_1280x720_stream() {
        // x264 baseline 640x480 (no cropping).
        let sps = [
            0x67, 0x42, 0xc0, 0x1e, 0xda, 0x02, 0x80, 0xf6, 0x84, 0x00, 0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0x03, 0x00,
            0xf0, 0x3c, 0x58, 0xba, 0x80,
        ];
        let s = parse_sps(&sps).expect("sps");
        assert_eq!((s.width, s.height, s.profile), (640, 480, 66));
        // High profile 1280x720 (1280x720 exactly, 80x45 macroblocks).
        let sps = [
            0x67, 0x64, 0x00, 0x1f, 0xac, 0xd9, 0x40, 0x50, 0x05, 0xbb, 0x01, 0x10, 0x00, 0x00, 0x03, 0x00, 0x10, 0x00,
            0x00, 0x03, 0x03, 0xc0, 0xf1, 0x83, 0x19, 0x60,
        ];
        let s = parse_sps(&sps).expect("sps");
        assert_eq!((s.width, s.height, s.profile), (1280, 720, 100));
        assert_eq!(parse_sps(&[0x68, 1, 2, 3]), None);
    }

    #[test]
    fn nal_units_and_keyframes() {
        let au = [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 9, 9];
        let nals: Vec<&[u8]> = nal_units(&au).collect();
        assert_eq!(nals, vec![&[0x67, 1, 2][..], &[0x68, 3][..], &[0x65, 9, 9][..]]);
        assert!(is_keyframe(&au));
        assert!(!is_keyframe(&[0, 0, 1, 0x41, 1]));
    }
}
