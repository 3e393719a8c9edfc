/** Decode a URL-safe base64 VAPID public key into the bytes `PushManager.subscribe` expects. */
export function urlBase64ToUint8Array(base64: string): Uint8Array<ArrayBuffer> {
  const padded = base64.trim().replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (base64.trim().length % 4)) % 4);
  const raw = atob(padded);
  const out = new Uint8Array(new ArrayBuffer(raw.length));
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}
