//! Fast downscaling for the ladder's common exact steps: 2:1 (720p → 360p) and 3:2 (1080p → 720p,
//! 720p → 480p) on both axes of a planar 8-bit picture (yuv420p and the like), by area averaging — the
//! box filter that is the textbook choice for decimation by these factors. Each output pixel is the
//! average of the input area it covers: for 3:2, pixels a b c become (2a + b) / 3 and (b + 2c) / 3 per
//! axis, summed in 16 bits and rounded once. These loops are what libswscale's generic filter does in
//! ~2–4× the operations (its bilinear downscale by 1.5 uses 4 taps per axis), and they are about the
//! cheapest correct thing for the job. Any other size, format or ratio goes through libswscale.

use ff::frame;
use ffmpeg_next as ff;

/// An exact ratio this module scales by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// 2:1 on both axes.
    Half,
    /// 3:2 on both axes.
    TwoThirds,
}

impl Step {
    /// The step from `sw`×`sh` to `dw`×`dh`, if it is one of ours.
    pub fn between(sw: usize, sh: usize, dw: usize, dh: usize) -> Option<Step> {
        if dw == 0 || dh == 0 {
            None
        } else if dw * 2 == sw && dh * 2 == sh {
            Some(Step::Half)
        } else if dw * 3 == sw * 2 && dh * 3 == sh * 2 {
            Some(Step::TwoThirds)
        } else {
            None
        }
    }
}

/// Planes of 8-bit planar formats this module handles, with their chroma subsampling shifts.
fn planar_layout(fmt: ff::format::Pixel) -> Option<&'static [(u32, u32)]> {
    use ff::format::Pixel as P;
    match fmt {
        P::YUV420P | P::YUVJ420P => Some(&[(0, 0), (1, 1), (1, 1)]),
        P::YUV422P | P::YUVJ422P => Some(&[(0, 0), (1, 0), (1, 0)]),
        P::YUV444P | P::YUVJ444P => Some(&[(0, 0), (0, 0), (0, 0)]),
        P::GRAY8 => Some(&[(0, 0)]),
        _ => None,
    }
}

/// The step that scales `src` into a `dw`×`dh` picture of the same format plane by plane, if every
/// plane's size changes by exactly that step.
pub fn step_for(src: &frame::Video, dst_fmt: ff::format::Pixel, dw: u32, dh: u32) -> Option<Step> {
    if src.format() != dst_fmt {
        return None;
    }
    let planes = planar_layout(dst_fmt)?;
    let (sw, sh) = (src.width(), src.height());
    let step = Step::between(sw as usize, sh as usize, dw as usize, dh as usize)?;
    let sub = |v: u32, s: u32| v.div_ceil(1 << s) as usize;
    let all =
        planes.iter().all(|&(sx, sy)| Step::between(sub(sw, sx), sub(sh, sy), sub(dw, sx), sub(dh, sy)) == Some(step));
    all.then_some(step)
}

/// Scale `src` into `dst` (allocated with the target size and `src`'s format) by `step`. The caller
/// has checked the sizes with `step_for`; a plane whose sizes are not `step` apart is left alone.
pub fn run(step: Step, src: &frame::Video, dst: &mut frame::Video) {
    let Some(planes) = planar_layout(src.format()) else { return };
    for (p, &(sx, sy)) in planes.iter().enumerate() {
        let sub = |v: u32, s: u32| v.div_ceil(1 << s) as usize;
        let (dw, dh) = (sub(dst.width(), sx), sub(dst.height(), sy));
        let (ss, ds) = (src.stride(p), dst.stride(p));
        let s = src.data(p);
        let (sw, sh) = (sub(src.width(), sx), sub(src.height(), sy));
        if Step::between(sw, sh, dw, dh) != Some(step) || s.len() < (sh - 1) * ss + sw || ds < dw {
            continue;
        }
        let d = dst.data_mut(p);
        if d.len() < (dh - 1) * ds + dw {
            continue;
        }
        match step {
            Step::Half => half(s, ss, d, ds, dw, dh),
            Step::TwoThirds => two_thirds(s, ss, d, ds, dw, dh),
        }
    }
}

/// The rows `y` of a plane: from the row's start to the next row's (or the buffer's end), so the
/// SIMD loops may read a few bytes past the picture's width where the stride leaves room.
fn row(plane: &[u8], stride: usize, y: usize) -> &[u8] {
    let start = (y * stride).min(plane.len());
    &plane[start..(start + stride).min(plane.len())]
}

/// 2:1: each output pixel is the rounded mean of a 2×2 block.
fn half(src: &[u8], ss: usize, dst: &mut [u8], ds: usize, dw: usize, dh: usize) {
    for y in 0..dh {
        let (r0, r1) = (row(src, ss, 2 * y), row(src, ss, 2 * y + 1));
        let out = &mut dst[y * ds..][..dw];
        let done = simd::half_row(r0, r1, out);
        half_row_scalar(r0, r1, out, done);
    }
}

fn half_row_scalar(r0: &[u8], r1: &[u8], out: &mut [u8], from: usize) {
    for x in from..out.len() {
        let sum = u16::from(r0[2 * x]) + u16::from(r0[2 * x + 1]) + u16::from(r1[2 * x]) + u16::from(r1[2 * x + 1]);
        out[x] = ((sum + 2) >> 2) as u8;
    }
}

/// 3:2: rows a b c become 2a + b and b + 2c, and the same across each row: 3×3 input pixels give
/// 2×2 output pixels, each a 16-bit weighted sum divided by 9 with rounding.
fn two_thirds(src: &[u8], ss: usize, dst: &mut [u8], ds: usize, dw: usize, dh: usize) {
    for y in 0..dh / 2 {
        let (r0, r1, r2) = (row(src, ss, 3 * y), row(src, ss, 3 * y + 1), row(src, ss, 3 * y + 2));
        let (top, bottom) = dst[2 * y * ds..].split_at_mut(ds);
        let (o0, o1) = (&mut top[..dw], &mut bottom[..dw]);
        let done = simd::two_thirds_rows(r0, r1, r2, o0, o1);
        two_thirds_rows_scalar(r0, r1, r2, o0, o1, done);
    }
}

/// Output pairs from `from / 2` on (`from` is even).
fn two_thirds_rows_scalar(r0: &[u8], r1: &[u8], r2: &[u8], o0: &mut [u8], o1: &mut [u8], from: usize) {
    let h =
        |r: &[u8], i: usize| (2 * u16::from(r[i]) + u16::from(r[i + 1]), u16::from(r[i + 1]) + 2 * u16::from(r[i + 2]));
    for k in from / 2..o0.len() / 2 {
        let ((a0, a1), (b0, b1), (c0, c1)) = (h(r0, 3 * k), h(r1, 3 * k), h(r2, 3 * k));
        o0[2 * k] = div9(2 * a0 + b0);
        o0[2 * k + 1] = div9(2 * a1 + b1);
        o1[2 * k] = div9(b0 + 2 * c0);
        o1[2 * k + 1] = div9(b1 + 2 * c1);
    }
}

/// round(x / 9) for x ≤ 2295 (9 × 255): (x + 4) × 7282 >> 16, exact in that range.
#[inline(always)]
fn div9(x: u16) -> u8 {
    ((u32::from(x + 4) * 7282) >> 16) as u8
}

/// SSSE3 kernels (x86-64, detected at run time): `pmaddubsw` forms the weighted horizontal pairs
/// after a `pshufb`, as libyuv's row scalers do. Each returns how many output pixels it wrote; the
/// scalar code finishes the row.
#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    fn ssse3() -> bool {
        std::arch::is_x86_feature_detected!("ssse3")
    }

    pub fn half_row(r0: &[u8], r1: &[u8], out: &mut [u8]) -> usize {
        if !ssse3() {
            return 0;
        }
        // SAFETY: SSSE3 was detected above.
        unsafe { half_row_ssse3(r0, r1, out) }
    }

    #[target_feature(enable = "ssse3")]
    unsafe fn half_row_ssse3(r0: &[u8], r1: &[u8], out: &mut [u8]) -> usize {
        let ones = _mm_set1_epi8(1);
        let two = _mm_set1_epi16(2);
        let mut x = 0;
        // 16 input bytes of each row → 8 output bytes.
        while 2 * x + 16 <= r0.len().min(r1.len()) && x + 8 <= out.len() {
            // SAFETY: the loads read r0/r1[2x..2x+16] and the store writes out[x..x+8], all in bounds.
            let a = _mm_loadu_si128(r0.as_ptr().add(2 * x) as *const __m128i);
            let b = _mm_loadu_si128(r1.as_ptr().add(2 * x) as *const __m128i);
            let sum = _mm_add_epi16(_mm_maddubs_epi16(a, ones), _mm_maddubs_epi16(b, ones));
            let avg = _mm_srli_epi16(_mm_add_epi16(sum, two), 2);
            _mm_storel_epi64(out.as_mut_ptr().add(x) as *mut __m128i, _mm_packus_epi16(avg, avg));
            x += 8;
        }
        x
    }

    pub fn two_thirds_rows(r0: &[u8], r1: &[u8], r2: &[u8], o0: &mut [u8], o1: &mut [u8]) -> usize {
        if !ssse3() {
            return 0;
        }
        // SAFETY: SSSE3 was detected above.
        unsafe { two_thirds_rows_ssse3(r0, r1, r2, o0, o1) }
    }

    #[target_feature(enable = "ssse3")]
    unsafe fn two_thirds_rows_ssse3(r0: &[u8], r1: &[u8], r2: &[u8], o0: &mut [u8], o1: &mut [u8]) -> usize {
        // a0 b0 c0 a1 b1 c1 … → (a0 b0)(b0 c0)(a1 b1)(b1 c1)…, weighted 2,1 and 1,2.
        let pairs = _mm_setr_epi8(0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 7, 8, 9, 10, 10, 11);
        let weights = _mm_setr_epi8(2, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2);
        let four = _mm_set1_epi16(4);
        let ninth = _mm_set1_epi16(7282);
        let len = r0.len().min(r1.len()).min(r2.len());
        let mut x = 0; // output pixel; input byte 3x/2
                       // 12 input bytes (16 loaded) of each row → 8 output bytes in each output row.
        while x / 2 * 3 + 16 <= len && x + 8 <= o0.len().min(o1.len()) {
            let i = x / 2 * 3;
            // SAFETY: the loads read r*[i..i+16] and the stores write o*[x..x+8], all in bounds.
            macro_rules! h {
                ($r:expr) => {
                    _mm_maddubs_epi16(
                        _mm_shuffle_epi8(_mm_loadu_si128($r.as_ptr().add(i) as *const __m128i), pairs),
                        weights,
                    )
                };
            }
            let (a, b, c) = (h!(r0), h!(r1), h!(r2));
            let top = _mm_add_epi16(_mm_add_epi16(a, a), b);
            let bottom = _mm_add_epi16(_mm_add_epi16(c, c), b);
            let top = _mm_mulhi_epu16(_mm_add_epi16(top, four), ninth);
            let bottom = _mm_mulhi_epu16(_mm_add_epi16(bottom, four), ninth);
            _mm_storel_epi64(o0.as_mut_ptr().add(x) as *mut __m128i, _mm_packus_epi16(top, top));
            _mm_storel_epi64(o1.as_mut_ptr().add(x) as *mut __m128i, _mm_packus_epi16(bottom, bottom));
            x += 8;
        }
        x
    }
}

/// Elsewhere the scalar loops do all the work.
#[cfg(not(target_arch = "x86_64"))]
mod simd {
    pub fn half_row(_: &[u8], _: &[u8], _: &mut [u8]) -> usize {
        0
    }
    pub fn two_thirds_rows(_: &[u8], _: &[u8], _: &[u8], _: &mut [u8], _: &mut [u8]) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::format::Pixel;

    fn picture(w: u32, h: u32, f: impl Fn(usize, usize, usize) -> u8) -> frame::Video {
        let mut v = frame::Video::new(Pixel::YUV420P, w, h);
        for p in 0..3 {
            let (pw, ph) =
                if p == 0 { (w as usize, h as usize) } else { (w.div_ceil(2) as usize, h.div_ceil(2) as usize) };
            let stride = v.stride(p);
            let data = v.data_mut(p);
            for y in 0..ph {
                for x in 0..pw {
                    data[y * stride + x] = f(p, x, y);
                }
            }
        }
        v
    }

    fn at(v: &frame::Video, p: usize, x: usize, y: usize) -> u8 {
        v.data(p)[y * v.stride(p) + x]
    }

    #[test]
    fn steps_are_exact_ratios_only() {
        assert_eq!(Step::between(1920, 1080, 1280, 720), Some(Step::TwoThirds));
        assert_eq!(Step::between(1280, 720, 640, 360), Some(Step::Half));
        assert_eq!(Step::between(720, 480, 480, 320), Some(Step::TwoThirds));
        assert_eq!(Step::between(1280, 720, 854, 480), None, "853.33 is not exact");
        assert_eq!(Step::between(1920, 1080, 640, 360), None, "3:1 goes to swscale");
        assert_eq!(Step::between(1280, 720, 1280, 720), None);
        assert_eq!(Step::between(1280, 720, 0, 0), None);
        let src = picture(1920, 1080, |_, _, _| 0);
        assert_eq!(step_for(&src, Pixel::YUV420P, 1280, 720), Some(Step::TwoThirds));
        assert_eq!(step_for(&src, Pixel::NV12, 1280, 720), None, "other formats go to swscale");
        // 1278x720 → 852x480: luma is 3:2 but chroma 639 → 426 is too, 360 → 240 as well.
        assert_eq!(step_for(&picture(1278, 720, |_, _, _| 0), Pixel::YUV420P, 852, 480), Some(Step::TwoThirds));
        // 1284x722 → 642x361: luma halves, chroma 642x361 → 321x181 does not.
        assert_eq!(step_for(&picture(1284, 722, |_, _, _| 0), Pixel::YUV420P, 642, 361), None);
    }

    #[test]
    fn flat_pictures_stay_flat() {
        for step in [Step::Half, Step::TwoThirds] {
            let src = picture(1920, 1080, |p, _, _| [16, 128, 235][p]);
            let (w, h) = if step == Step::Half { (960, 540) } else { (1280, 720) };
            let mut dst = frame::Video::new(Pixel::YUV420P, w, h);
            run(step, &src, &mut dst);
            for p in 0..3 {
                let (pw, ph) = if p == 0 { (w as usize, h as usize) } else { (w as usize / 2, h as usize / 2) };
                for y in 0..ph {
                    for x in 0..pw {
                        assert_eq!(at(&dst, p, x, y), [16, 128, 235][p], "{step:?} plane {p} at {x},{y}");
                    }
                }
            }
        }
    }

    #[test]
    fn outputs_are_area_averages() {
        // Pseudo-random content: every output pixel equals the exact area mean, rounded.
        let val = |p: usize, x: usize, y: usize| ((x * 7 + y * 13 + p * 31 + (x * y) % 17) % 256) as u8;
        let src = picture(96, 54, val);
        let mut half_dst = frame::Video::new(Pixel::YUV420P, 48, 27);
        assert_eq!(step_for(&src, Pixel::YUV420P, 48, 27), None, "chroma 48x27 cannot halve");
        run(Step::Half, &src, &mut half_dst);
        for y in 0..27 {
            for x in 0..48 {
                // Luma halves exactly even though chroma does not (that plane is left alone).
                let sum: u32 = [(0, 0), (1, 0), (0, 1), (1, 1)]
                    .iter()
                    .map(|(dx, dy)| u32::from(val(0, 2 * x + dx, 2 * y + dy)))
                    .sum();
                assert_eq!(u32::from(at(&half_dst, 0, x, y)), (sum + 2) / 4, "half at {x},{y}");
            }
        }
        let mut tt = frame::Video::new(Pixel::YUV420P, 64, 36);
        run(Step::TwoThirds, &src, &mut tt);
        // Weights of input index i (0..3) for output phase k (0..2), in thirds.
        let w = |k: usize, i: usize| -> u32 { [[2, 1, 0], [0, 1, 2]][k][i] };
        for y in 0..36 {
            for x in 0..64 {
                let (bx, by, kx, ky) = (x / 2 * 3, y / 2 * 3, x % 2, y % 2);
                let mut sum = 0u32;
                for j in 0..3 {
                    for i in 0..3 {
                        sum += w(kx, i) * w(ky, j) * u32::from(val(0, bx + i, by + j));
                    }
                }
                let want = (f64::from(sum) / 9.0).round() as u32;
                assert_eq!(u32::from(at(&tt, 0, x, y)), want, "2/3 at {x},{y} (sum {sum})");
            }
        }
        // Chroma of 96x54 is 48x27 → 32x18 (3:2): checked for one pixel.
        let c = |x, y| u32::from(val(1, x, y));
        let want = ((4 * c(0, 0) + 2 * c(1, 0) + 2 * c(0, 1) + c(1, 1)) as f64 / 9.0).round() as u32;
        assert_eq!(u32::from(at(&tt, 1, 0, 0)), want);
    }

    #[test]
    fn simd_rows_match_the_scalar_rows() {
        let val = |i: usize| ((i * 37 + (i * i) % 251) % 256) as u8;
        for dw in [2usize, 8, 14, 16, 24, 30, 640, 642, 852, 1280] {
            let sw = dw * 3 / 2;
            let rows: Vec<Vec<u8>> = (0..3).map(|r| (0..sw).map(|i| val(i + 1000 * r)).collect()).collect();
            let (mut a0, mut a1, mut b0, mut b1) = (vec![0; dw], vec![0; dw], vec![0; dw], vec![0; dw]);
            let done = simd::two_thirds_rows(&rows[0], &rows[1], &rows[2], &mut a0, &mut a1);
            two_thirds_rows_scalar(&rows[0], &rows[1], &rows[2], &mut a0, &mut a1, done);
            two_thirds_rows_scalar(&rows[0], &rows[1], &rows[2], &mut b0, &mut b1, 0);
            assert_eq!((a0, a1), (b0, b1), "3:2 at width {dw} (simd did {done})");
            if dw >= 16 && cfg!(target_arch = "x86_64") && std::arch::is_x86_feature_detected!("ssse3") {
                assert!(done > 0, "the SIMD loop ran at width {dw}");
            }

            let sw = dw * 2;
            let rows: Vec<Vec<u8>> = (0..2).map(|r| (0..sw).map(|i| val(i + 777 * r)).collect()).collect();
            let (mut a, mut b) = (vec![0; dw], vec![0; dw]);
            let done = simd::half_row(&rows[0], &rows[1], &mut a);
            half_row_scalar(&rows[0], &rows[1], &mut a, done);
            half_row_scalar(&rows[0], &rows[1], &mut b, 0);
            assert_eq!(a, b, "2:1 at width {dw} (simd did {done})");
        }
    }

    #[test]
    fn div9_rounds_like_floating_point() {
        for x in 0..=2295u16 {
            assert_eq!(u32::from(div9(x)), (f64::from(x) / 9.0).round() as u32, "x = {x}");
        }
    }
}
