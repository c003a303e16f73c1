import { defineConfig } from 'tsup';

/** ESM and CommonJS builds with their type declarations; the dependencies stay external. */
export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  target: 'es2022',
  platform: 'neutral',
  sourcemap: true,
  clean: true,
});
