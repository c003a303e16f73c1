// Preloaded into a benchmarked service (NODE_OPTIONS="--expose-gc --require <this file>",
// GC_REPORT_FILE set) to tell retained memory from garbage without touching its code: on SIGUSR2
// it runs a full garbage collection and writes process.memoryUsage() (bytes), as JSON, to
// GC_REPORT_FILE. A bench signals, then reads the file.
'use strict';
const { writeFileSync } = require('node:fs');

const file = process.env.GC_REPORT_FILE;
if (file && typeof global.gc === 'function') {
  process.on('SIGUSR2', () => {
    global.gc();
    writeFileSync(file, JSON.stringify({ at: Date.now(), ...process.memoryUsage() }));
  });
}
