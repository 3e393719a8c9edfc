/**
 * Only http(s) URLs become links, frames or navigations. URLs from remote servers (a Fediverse actor's profile, an
 * engagement link, a WebFinger follow template, an IndieAuth authorization endpoint) and from settings (social
 * handles, external actions) pass through `httpUrl` before the page uses them: `javascript:`, `data:`, `vbscript:`,
 * `blob:`, `file:` and anything else that is not http(s) is refused, so no such URL can run script in castd's origin.
 * The check is on the URL as the browser parses it (tabs and newlines inside a scheme, leading blanks and odd case are
 * all seen through), and the URL handed back is that parsed form, so what was checked is what is used.
 */

/** The page's address, the base for relative URLs (a fixed one outside a browser, for tests). */
function pageBase(): string {
  return typeof location !== 'undefined' && location.href ? location.href : 'http://localhost/';
}

/**
 * `raw` as an absolute http(s) URL (relative ones resolved against `base`, by default this page), or null when it is
 * not a string, does not parse, or has any other scheme.
 */
export function httpUrl(raw: unknown, base: string = pageBase()): string | null {
  if (typeof raw !== 'string') return null;
  const text = raw.trim();
  if (!text) return null;
  let url: URL;
  try {
    url = new URL(text, base);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  return url.href;
}

/** Send the browser to `raw` when it is an http(s) URL; false (and nothing happens) otherwise. */
export function navigateTo(raw: unknown): boolean {
  const url = httpUrl(raw);
  if (!url) return false;
  window.location.assign(url);
  return true;
}
