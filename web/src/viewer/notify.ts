/** Browser push: register the service worker, subscribe with the server's VAPID key, and register the subscription. */
import { api, apiUrl } from '../api';
import { ensureToken } from '../chat/session';
import { basePath } from '../lib/base';
import { urlBase64ToUint8Array } from '../lib/push';

export const pushSupported = () =>
  typeof window !== 'undefined' && 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;

export async function subscribeToNotifications(publicKey: string): Promise<void> {
  if (!pushSupported()) throw new Error('This browser does not support push notifications.');
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') throw new Error('Notifications were not allowed.');
  // The channel's own worker, for the channel's pages (a channel's subscription is that channel's).
  await navigator.serviceWorker.register(apiUrl('/serviceworker.js'), { scope: `${basePath()}/` });
  const registration = await navigator.serviceWorker.ready;
  const subscription =
    (await registration.pushManager.getSubscription()) ??
    (await registration.pushManager.subscribe({
      userVisibleOnly: true,
      applicationServerKey: urlBase64ToUint8Array(publicKey),
    }));
  const token = await ensureToken();
  await api.registerNotification(token, 'BROWSER_PUSH_NOTIFICATION', JSON.stringify(subscription));
}
