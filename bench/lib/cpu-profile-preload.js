// Preloaded into a benchmarked service (NODE_OPTIONS="--require <this file>", CPU_PROFILE_FILE
// set) to take a V8 CPU profile of a window the bench chooses, without touching the service's
// code (--cpu-prof is not allowed in NODE_OPTIONS): the first SIGUSR2 starts the profiler, the
// second stops it and writes the profile to CPU_PROFILE_FILE.
'use strict';
const { writeFileSync } = require('node:fs');
const { Session } = require('node:inspector');

const file = process.env.CPU_PROFILE_FILE;
if (file) {
  const session = new Session();
  session.connect();
  let running = false;
  process.on('SIGUSR2', () => {
    if (!running) {
      running = true;
      session.post('Profiler.enable', () =>
        // 100 µs between samples (default 1 ms): enough of them in a few seconds of load.
        session.post('Profiler.setSamplingInterval', { interval: 100 }, () =>
          session.post('Profiler.start'),
        ),
      );
      return;
    }
    running = false;
    session.post('Profiler.stop', (error, result) => {
      if (!error) writeFileSync(file, JSON.stringify(result.profile));
    });
  });
}
