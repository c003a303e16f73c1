import { Worker } from 'node:worker_threads';
import { AppError } from '../common/errors/app-error';

/**
 * How long reducing one uploaded HTML file to text may take. A flat 1 MiB page takes under a
 * second; hostile markup (200,000 unclosed `<div>`s) takes about 30 s and then overflows the
 * stack, so it is stopped here and refused (docs/knowledge.md#html).
 */
export const HTML_CONVERSION_TIMEOUT_MS = 5_000;

/** Conversions running at once in this process; more wait for a free one. */
export const HTML_CONVERSIONS_AT_ONCE = 2;

/** A conversion's heap: 1 MiB of HTML takes about 60 MiB; past this the worker is ended. */
const WORKER_HEAP_MB = 192;

/**
 * The worker's code, given as source (eval) so that it runs the same from src/ under ts-jest and
 * from dist/ once built; html-to-text is required by the path this module resolves.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { convert } = require(workerData.module);
try {
  parentPort.postMessage({ text: convert(workerData.html, workerData.options) });
} catch (error) {
  parentPort.postMessage({ failed: String(error && error.message) });
}`;

/** Scripts, styles and images carry no text a reader sees; block elements keep their breaks. */
const CONVERT_OPTIONS = {
  wordwrap: false,
  selectors: [
    { selector: 'a', options: { ignoreHref: true } },
    { selector: 'img', format: 'skip' },
  ],
};

const HTML_TO_TEXT = require.resolve('html-to-text');

const refused = (problem: string) => AppError.validation([{ field: 'file', problem }]);

/** Waiters for a free conversion slot, first come first served. */
const waiting: (() => void)[] = [];
let running = 0;

async function slot(): Promise<void> {
  if (running < HTML_CONVERSIONS_AT_ONCE) {
    running += 1;
    return;
  }
  // The slot is handed over by release(), so `running` stays counted meanwhile.
  await new Promise<void>((resolve) => waiting.push(resolve));
}

function release(): void {
  const next = waiting.shift();
  if (next) next();
  else running -= 1;
}

/** One conversion in a worker of its own: ended at the time limit, whatever it is doing. */
function convertInWorker(html: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { module: HTML_TO_TEXT, html, options: CONVERT_OPTIONS },
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
    });
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      outcome();
    };
    const timer = setTimeout(
      () =>
        settle(() =>
          reject(refused(`is HTML that takes more than ${timeoutMs} ms to reduce to text`)),
        ),
      timeoutMs,
    );
    worker.on('message', (message: { text?: string; failed?: string }) =>
      settle(() =>
        message.text === undefined
          ? reject(refused('is HTML that cannot be reduced to text (nested too deeply)'))
          : resolve(message.text),
      ),
    );
    // Out of heap, or a failure to start: the file is refused all the same, nothing is kept.
    worker.on('error', () =>
      settle(() => reject(refused('is HTML that cannot be reduced to text within its memory'))),
    );
    worker.on('exit', () =>
      settle(() => reject(refused('is HTML that cannot be reduced to text'))),
    );
  });
}

/**
 * The text of an HTML document, reduced off the event loop: a worker thread per conversion, at
 * most HTML_CONVERSIONS_AT_ONCE at a time, each ended after `timeoutMs` (400 naming `file`).
 */
export async function htmlToText(
  html: string,
  timeoutMs = HTML_CONVERSION_TIMEOUT_MS,
): Promise<string> {
  await slot();
  try {
    return await convertInWorker(html, timeoutMs);
  } finally {
    release();
  }
}
