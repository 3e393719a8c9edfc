import { defineConfig, type Connect, type Plugin } from 'vite';
import { resolve } from 'node:path';

/**
 * Page routes as the castd daemon serves them, mapped to the HTML entry files of this build.
 * The daemon embeds `dist/` and does the same mapping; this plugin repeats it for `vite` / `vite preview`.
 */
const PAGE_ROUTES: Array<[RegExp, string]> = [
  [/^\/admin(\/.*)?$/, '/admin.html'],
  [/^\/embed\/chat\/readonly\/?$/, '/embed-chat-readonly.html'],
  [/^\/embed\/chat\/readwrite\/?$/, '/embed-chat-readwrite.html'],
  [/^\/embed\/video\/?$/, '/embed-video.html'],
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
  plugins: [castdRoutes],
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
