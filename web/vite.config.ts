import { defineConfig, type Connect, type Plugin } from 'vite';
import { join, resolve } from 'node:path';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';

/**
 * Page routes as the castd daemon serves them, mapped to the HTML entry files of this build.
 * The daemon embeds `dist/` and does the same mapping; this plugin repeats it for `vite` / `vite preview`.
 */
const PAGE_ROUTES: Array<[RegExp, string]> = [
  [/^\/admin(\/.*)?$/, '/admin.html'],
  [/^\/embed\/chat\/readonly\/?$/, '/embed-chat-readonly.html'],
  [/^\/embed\/chat\/readwrite\/?$/, '/embed-chat-readwrite.html'],
  [/^\/embed\/video\/?$/, '/embed-video.html'],
  [/^\/clips\/[^/]+\/?$/, '/clip.html'],
  [/^\/channels\/?$/, '/channels.html'],
];

function rewritePages(): Connect.NextHandleFunction {
  return (req, _res, next) => {
    const [path, query] = (req.url ?? '/').split('?', 2);
    for (const [re, target] of PAGE_ROUTES) {
      if (re.test(path)) {
        req.url = target + (query ? `?${query}` : '');
        break;
      }
    }
    next();
  };
}

const castdRoutes: Plugin = {
  name: 'castd-page-routes',
  configureServer(server) {
    server.middlewares.use(rewritePages());
  },
  configurePreviewServer(server) {
    server.middlewares.use(rewritePages());
  },
};

/**
 * Precompressed copies of every text asset in `dist/` (`x.js.br`, `x.js.gz`, made once at build time
 * with the strongest settings): the daemon embeds them and serves the one the browser's
 * `Accept-Encoding` allows, so it never compresses per request. A copy that would not be smaller is
 * not written.
 */
const COMPRESSIBLE = /\.(js|css|html|svg|json|txt|webmanifest)$/;
function precompressDir(dir: string): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      precompressDir(path);
      continue;
    }
    if (!COMPRESSIBLE.test(name)) continue;
    const raw = readFileSync(path);
    const br = brotliCompressSync(raw, {
      params: { [zlib.BROTLI_PARAM_QUALITY]: zlib.BROTLI_MAX_QUALITY, [zlib.BROTLI_PARAM_SIZE_HINT]: raw.length },
    });
    const gz = gzipSync(raw, { level: 9 });
    if (br.length < raw.length) writeFileSync(`${path}.br`, br);
    if (gz.length < raw.length) writeFileSync(`${path}.gz`, gz);
  }
}

const precompress: Plugin = {
  name: 'castd-precompress',
  apply: 'build',
  closeBundle() {
    precompressDir(resolve(import.meta.dirname, 'dist'));
  },
};

// During development, everything that is not a page or an asset goes to a running daemon.
const daemon = process.env.CASTD_URL ?? 'http://127.0.0.1:8080';
const proxy = Object.fromEntries(
  ['/api', '/hls', '/logo', '/thumbnail.jpg', '/preview.gif', '/customjavascript', '/img', '/public'].map((p) => [
    p,
    { target: daemon, changeOrigin: true },
  ]),
);

export default defineConfig({
  base: '/',
  plugins: [castdRoutes, precompress],
  oxc: {
    jsx: { runtime: 'automatic', importSource: 'preact' },
  },
  server: {
    proxy: { ...proxy, '/ws': { target: daemon.replace(/^http/, 'ws'), ws: true } },
  },
  preview: { proxy },
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    target: 'es2020',
    // hls.js (full build: the light build has no CMCD) is ~580 kB; it is only loaded by the viewer and the video embed.
    chunkSizeWarningLimit: 700,
    rolldownOptions: {
      input: {
        index: resolve(import.meta.dirname, 'index.html'),
        admin: resolve(import.meta.dirname, 'admin.html'),
        'embed-chat-readonly': resolve(import.meta.dirname, 'embed-chat-readonly.html'),
        'embed-chat-readwrite': resolve(import.meta.dirname, 'embed-chat-readwrite.html'),
        'embed-video': resolve(import.meta.dirname, 'embed-video.html'),
        clip: resolve(import.meta.dirname, 'clip.html'),
        channels: resolve(import.meta.dirname, 'channels.html'),
      },
      output: {
        codeSplitting: {
          groups: [
            { name: 'hls', test: /node_modules[\\/]hls\.js/ },
            { name: 'uplot', test: /node_modules[\\/]uplot/ },
            { name: 'preact', test: /node_modules[\\/]preact/ },
          ],
        },
      },
    },
  },
});
