/**
 * E2E specs: the app built from AppModule over HTTP (supertest) on a real PostgreSQL: the
 * machine's when DATABASE_URL is set, else an embedded one. Each run gets a fresh database.
 */
module.exports = {
  rootDir: '..',
  testRegex: 'test/.*\\.e2e-spec\\.ts$',
  moduleFileExtensions: ['js', 'json', 'ts'],
  transform: {
    '^.+\\.ts$': [
      'ts-jest',
      {
        diagnostics: false,
        tsconfig: { module: 'commonjs', moduleResolution: 'node' },
        // The swagger CLI plugin, so DTO schemas in the e2e app match the built app's.
        astTransformers: { before: ['<rootDir>/test/support/swagger-plugin.js'] },
      },
    ],
    // jose ships ESM only; Node loads it with require(esm), Jest's CommonJS runtime cannot.
    '^.+/node_modules/jose/.+\\.js$': [
      'ts-jest',
      { diagnostics: false, tsconfig: { allowJs: true, module: 'commonjs' } },
    ],
  },
  transformIgnorePatterns: ['/node_modules/(?!jose/)'],
  testEnvironment: 'node',
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // One app at a time: the specs share one database and a 2-core machine.
  maxWorkers: 1,
  // In one worker process, not in Jest's own: each spec loads the whole app afresh, and in band
  // the process grew past 4 GB (Node 24's heap limit here is 4.5 GB) before V8 collected, which
  // killed a CI run with no report. The worker is replaced once its heap passes this after a spec.
  workerIdleMemoryLimit: '1.5GB',
  testTimeout: 60_000,
  // No forceExit: every spec closes what it opens and the app's shutdown releases the rest, so
  // Jest's process and its worker end by themselves (createTestApp also closes an app that fails
  // to build); in band, --detectOpenHandles reports nothing. Should Jest print "a worker process
  // has failed to exit gracefully" at the end of a run, that is no leak but a deadline: Jest 29
  // gives the worker 500 ms from that message to its exit (jest-worker's FORCE_EXIT_DELAY), and a
  // worker holding an app's heap needs 120-250 ms on a busy 2-core machine, more under heavier
  // load. Jest 30.4 makes the delay configurable (workerGracefulExitTimeout).
};
