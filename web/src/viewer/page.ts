/** Page-level customisation from the public config: custom CSS, appearance variables, custom JavaScript, title. */
import { apiUrl, type PublicConfig } from '../api';
import { cssVarName } from '../lib/urls';

export function applyCustomisation(config: PublicConfig, opts: { customJavascript: boolean }) {
  const root = document.documentElement;
  for (const [key, value] of Object.entries(config.appearanceVariables ?? {})) {
    const name = cssVarName(key);
    if (name && typeof value === 'string' && value.trim()) root.style.setProperty(name, value);
  }
  if (config.customStyles) {
    let style = document.getElementById('custom-styles') as HTMLStyleElement | null;
    if (!style) {
      style = document.createElement('style');
      style.id = 'custom-styles';
      document.head.appendChild(style);
    }
    style.textContent = config.customStyles;
  }
  if (opts.customJavascript && !document.getElementById('custom-javascript')) {
    const script = document.createElement('script');
    script.id = 'custom-javascript';
    script.src = apiUrl('/customjavascript');
    script.async = true;
    document.body.appendChild(script);
  }
  if (config.name) document.title = config.name;
}
