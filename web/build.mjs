// Builds the web console (contract §28) into dist/web, which the service serves at /console:
// one JavaScript bundle and one style sheet, named by a hash of their content (served as
// immutable), the page that names them, and a Brotli and a gzip copy of each. `--watch` rebuilds
// on every change (docs/console.md). Run by `npm run build` after `nest build`, which empties dist/.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'dist', 'web');
const assets = join(out, 'assets');
const watch = process.argv.includes('--watch');

/** Writes a file with its compressed copies (kept only when smaller). */
function write(path, bytes) {
  writeFileSync(path, bytes);
  const br = brotliCompressSync(bytes, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: 11,
      [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
    },
  });
  const gz = gzipSync(bytes, { level: 9 });
  if (br.length < bytes.length) writeFileSync(`${path}.br`, br);
  if (gz.length < bytes.length) writeFileSync(`${path}.gz`, gz);
}

const hashed = (name, bytes) => {
  const hash = createHash('sha256').update(bytes).digest('hex').slice(0, 12);
  const dot = name.lastIndexOf('.');
  return `${name.slice(0, dot)}-${hash}${name.slice(dot)}`;
};

/** After each build: the page naming this build's assets, and the compressed copies. */
const page = {
  name: 'console-page',
  setup(build) {
    build.onEnd((result) => {
      if (result.errors.length > 0) return;
      const files = new Map();
      for (const file of result.outputFiles) {
        if (file.path.endsWith('.map')) continue;
        const name = hashed(basename(file.path), file.contents);
        files.set(basename(file.path), name);
        write(join(assets, name), file.contents);
      }
      const icon = readFileSync(join(here, 'src', 'favicon.svg'));
      const iconName = hashed('favicon.svg', icon);
      write(join(assets, iconName), icon);
      const html = readFileSync(join(here, 'index.html'), 'utf8')
        .replace('%SCRIPT%', `/console/assets/${files.get('console.js')}`)
        .replace('%STYLE%', `/console/assets/${files.get('console.css')}`)
        .replace('%ICON%', `/console/assets/${iconName}`);
      write(join(out, 'index.html'), Buffer.from(html));
      if (watch) process.stdout.write(`console built into ${out}\n`);
    });
  },
};

rmSync(out, { recursive: true, force: true });
mkdirSync(assets, { recursive: true });
const options = {
  entryPoints: { console: join(here, 'src', 'main.tsx') },
  outdir: assets,
  bundle: true,
  format: 'esm',
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  minify: !watch,
  sourcemap: false,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  write: false,
  logLevel: 'warning',
  define: { 'process.env.NODE_ENV': watch ? '"development"' : '"production"' },
  plugins: [page],
};
if (watch) {
  const context = await esbuild.context(options);
  await context.watch();
} else {
  await esbuild.build(options);
}
