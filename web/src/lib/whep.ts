/**
 * WHEP playback (WebRTC): a recvonly RTCPeerConnection (H.264 + Opus) offered to `POST /whep` without trickle ICE.
 * `playWhep` resolves once the first video frame plays, and rejects when that does not happen within `timeoutMs`
 * (UDP blocked, the viewer cap reached: 503, WebRTC playback off: 403), so the player falls back to LL-HLS.
 */
import { apiUrl } from '../api';

export const WHEP_URL = '/whep';

export interface WhepSession {
  pc: RTCPeerConnection;
  /** End the session (closes the connection and DELETEs the resource). */
  close: () => void;
}

/** Whether this browser can play over WebRTC. */
export function webrtcSupported(): boolean {
  return typeof window !== 'undefined' && typeof window.RTCPeerConnection === 'function';
}

export async function playWhep(video: HTMLVideoElement, timeoutMs: number): Promise<WhepSession> {
  const pc = new RTCPeerConnection();
  let location: string | null = null;
  const close = () => {
    pc.close();
    if (location) fetch(apiUrl(location), { method: 'DELETE' }).catch(() => undefined);
  };
  try {
    pc.addTransceiver('video', { direction: 'recvonly' });
    pc.addTransceiver('audio', { direction: 'recvonly' });
    const stream = new MediaStream();
    pc.ontrack = (e) => {
      stream.addTrack(e.track);
      if (video.srcObject !== stream) video.srcObject = stream;
    };
    const deadline = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('WebRTC did not play in time')), timeoutMs));
    const attempt = (async () => {
      await pc.setLocalDescription(await pc.createOffer());
      await new Promise<void>((resolve) => {
        if (pc.iceGatheringState === 'complete') return resolve();
        pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
        setTimeout(resolve, 1000);
      });
      const res = await fetch(apiUrl(WHEP_URL), {
        method: 'POST',
        headers: { 'Content-Type': 'application/sdp' },
        body: pc.localDescription?.sdp ?? '',
      });
      if (res.status !== 201) throw new Error(`WHEP: ${res.status}`);
      location = res.headers.get('Location');
      await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
      await new Promise<void>((resolve) => {
        const onPlaying = () => {
          if (video.videoWidth > 0) resolve();
          else video.addEventListener('resize', () => resolve(), { once: true });
        };
        video.addEventListener('playing', onPlaying, { once: true });
      });
    })();
    await Promise.race([attempt, deadline]);
    return { pc, close };
  } catch (e) {
    close();
    video.srcObject = null;
    throw e;
  }
}
