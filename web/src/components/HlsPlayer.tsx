import Hls from 'hls.js';
import { useEffect, useRef } from 'preact/hooks';

/** An HLS player (hls.js, or the browser's own HLS where it has one). */
export function HlsPlayer({ src, id }: { src: string; id?: string }) {
  const ref = useRef<HTMLVideoElement>(null);
  useEffect(() => {
    const video = ref.current;
    if (!video) return undefined;
    if (Hls.isSupported()) {
      const hls = new Hls();
      hls.loadSource(src);
      hls.attachMedia(video);
      return () => hls.destroy();
    }
    video.src = src;
    return undefined;
  }, [src]);
  return <video ref={ref} id={id} controls playsInline style={{ width: '100%', maxHeight: '60vh', background: '#000' }} />;
}

