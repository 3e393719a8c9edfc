//! `castd remux` (internal): the transcoder's HLS segments, written one after another to its stdin (MPEG-TS
//! segments as they are; fMP4 ones after their init segment), remuxed to an FLV byte stream on its stdout:
//! packets copied, no decode, no encode. Simulcast's `variant` targets run it and forward the FLV tags.
//!
//! The input format is probed (MPEG-TS or fragmented MP4); video and audio streams are kept, anything else
//! dropped. Exits 0 at the end of its input, 1 on an error (said on stderr).

use ff::{format, media, Rational};
use ffmpeg_next as ff;

fn run() -> Result<(), ff::Error> {
    ff::init()?;
    let mut ictx = format::input(&"pipe:0")?;
    let mut octx = format::output_as(&"pipe:1", "flv")?;
    let mut map: Vec<Option<(usize, Rational)>> = Vec::new();
    for st in ictx.streams() {
        let kind = st.parameters().medium();
        if kind != media::Type::Video && kind != media::Type::Audio {
            map.push(None);
            continue;
        }
        let mut ost = octx.add_stream(ff::encoder::find(ff::codec::Id::None))?;
        ost.set_parameters(st.parameters());
        // SAFETY: the stream's parameters are owned by the output context; codec_tag 0 lets FLV pick its own.
        unsafe {
            (*ost.parameters().as_mut_ptr()).codec_tag = 0;
        }
        map.push(Some((ost.index(), st.time_base())));
    }
    octx.write_header()?;
    for (st, mut pkt) in ictx.packets() {
        let Some(Some((ost, from_tb))) = map.get(st.index()).copied() else { continue };
        let tb = octx.stream(ost).map(|s| s.time_base()).unwrap_or(from_tb);
        pkt.rescale_ts(from_tb, tb);
        pkt.set_stream(ost);
        pkt.set_position(-1);
        pkt.write_interleaved(&mut octx)?;
    }
    octx.write_trailer()
}

/// The `remux` subcommand's entry point; returns the exit status.
pub fn main() -> i32 {
    ff::util::log::set_level(ff::util::log::Level::Error);
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("castd remux: {e}");
            1
        }
    }
}
