// Preloaded into a benchmarked service (NODE_OPTIONS="--require <this file>", LOOP_DELAY_FILE set)
// to measure its event-loop delay without touching its code: a 10 ms timer notes how late it
// fires, and once a second the lateness samples of that second are appended to LOOP_DELAY_FILE
// as a JSON line `{"at": <epoch ms>, "lag_ms": [...]}`. A bench reads the lines of its window.
'use strict';
const { appendFileSync } = require('node:fs');

const file = process.env.LOOP_DELAY_FILE;
if (file) {
  const INTERVAL_MS = 10;
  let samples = [];
  let expected = performance.now() + INTERVAL_MS;
  const tick = () => {
    const now = performance.now();
    samples.push(Math.max(0, now - expected));
    expected = now + INTERVAL_MS;
    setTimeout(tick, INTERVAL_MS).unref();
  };
  setTimeout(tick, INTERVAL_MS).unref();
  setInterval(() => {
    appendFileSync(file, `${JSON.stringify({ at: Date.now(), lag_ms: samples })}\n`);
    samples = [];
  }, 1000).unref();
}
