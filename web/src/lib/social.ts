/** Social handle icons: the handle's own `icon`, else the icon `/api/socialplatforms` lists for its platform. */

export interface PlatformInfo {
  name: string;
  icon: string;
}

export type PlatformMap = Record<string, PlatformInfo>;

/** Where castd serves its platform icons (`/img/platformlogos/<key>.svg`). */
export const PLATFORM_ICON_PREFIX = '/img/platformlogos/';

/** The platform entry for a handle's platform: by key (`github`), else by display name (`GitHub`), case-insensitive. */
export function findPlatform(platform: string, platforms: PlatformMap | null | undefined): PlatformInfo | undefined {
  const key = String(platform ?? '').trim().toLowerCase();
  if (!key || !platforms || typeof platforms !== 'object') return undefined;
  const entry = Object.entries(platforms).find(([k, p]) => k.toLowerCase() === key || (p?.name ?? '').toLowerCase() === key);
  return entry?.[1];
}

/** The icon URL for a handle, or null when neither the handle nor the platform list has one. */
export function socialIcon(handle: { platform: string; icon?: string | null }, platforms: PlatformMap | null | undefined): string | null {
  const own = (handle.icon ?? '').trim();
  if (own) return own;
  return findPlatform(handle.platform, platforms)?.icon || null;
}

/**
 * The icon to save with a handle: a custom icon (any URL outside the platform icons) is kept; otherwise the icon of
 * the handle's platform, or '' when the platform is not a known one.
 */
export function iconForSave(handle: { platform: string; icon?: string | null }, platforms: PlatformMap | null | undefined): string {
  const own = (handle.icon ?? '').trim();
  if (own && !own.startsWith(PLATFORM_ICON_PREFIX)) return own;
  return findPlatform(handle.platform, platforms)?.icon ?? (platforms ? '' : own);
}
