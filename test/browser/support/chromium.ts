import { existsSync } from 'node:fs';

/** Where a Chromium may be: CHROMIUM_PATH, then Debian's package, then other distributions'. */
export const CHROMIUM_CANDIDATES = [
  process.env.CHROMIUM_PATH,
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome',
].filter((path): path is string => Boolean(path));

export function findChromium(): string | undefined {
  return CHROMIUM_CANDIDATES.find((path) => existsSync(path));
}

/**
 * The flags a headless Chromium needs on a CI machine without network: no sandbox (root), no GPU,
 * and none of its own background connections (which this machine refuses, many at a time).
 */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
