/**
 * Browser tests of the console (contract §28): Debian's Chromium driven by playwright-core against
 * the built service (`node dist/main.js`, built first if stale), on a fresh database (the
 * machine's when DATABASE_URL is set, else an embedded one). Without a Chromium they are skipped,
 * and the global setup says so in one line.
 */
module.exports = {
  rootDir: '..',
  testRegex: 'test/browser/.*\\.browser-spec\\.ts$',
  moduleFileExtensions: ['js', 'json', 'ts'],
  transform: {
    '^.+\\.ts$': [
      'ts-jest',
      { diagnostics: false, tsconfig: { module: 'commonjs', moduleResolution: 'node' } },
    ],
  },
  testEnvironment: 'node',
  globalSetup: '<rootDir>/test/browser/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/browser/support/global-teardown.ts',
  maxWorkers: 1,
  // In a worker, not in Jest's own process (a memory limit makes Jest use one even for one spec):
  // should anything the spec started outlive it, Jest ends the worker instead of waiting on it.
  workerIdleMemoryLimit: '1.5GB',
  testTimeout: 120_000,
};
