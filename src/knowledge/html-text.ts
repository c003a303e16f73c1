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

/** Conversions waiting for a slot in this process; past this an upload is refused at once. */
export const HTML_CONVERSIONS_WAITING = 8;

/**
 * Conversions one organization may have running or waiting in this process: one tenant's hostile
 * pages hold at most one of the slots, so another's upload always has one to wait for.
 */
const PER_ORGANIZATION = 1;

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

/** 429 with Retry-After: the conversions this process runs are taken; a retry finds one free. */
const busy = (message: string) =>
  new AppError('rate_limited', message, {
    headers: { 'Retry-After': String(Math.ceil(HTML_CONVERSION_TIMEOUT_MS / 1000)) },
  });

/** Why a conversion stopped when its client went (nobody reads it: the response is gone). */
const abortedBy = (signal?: AbortSignal): Error =>
  signal?.reason instanceof Error ? signal.reason : new Error('the client went');

/** Waiters for a free conversion slot, first come first served. */
const waiting: (() => void)[] = [];
let running = 0;
const heldByOrganization = new Map<string, number>();

/**
 * A conversion slot, waited for at most `timeoutMs` (then 429) and given up when the client
 * goes: a waiting upload holds its body in memory, so neither the queue nor the wait is unbounded.
 */
async function slot(timeoutMs: number, signal?: AbortSignal): Promise<void> {
  if (running < HTML_CONVERSIONS_AT_ONCE) {
    running += 1;
    return;
  }
  if (waiting.length >= HTML_CONVERSIONS_WAITING) {
    throw busy('Too many HTML uploads are being converted: retry shortly');
  }
  // The slot is handed over by release(), so `running` stays counted meanwhile.
  await new Promise<void>((resolve, reject) => {
    const handedOver = () => {
      stopWaiting();
      resolve();
    };
    const giveUp = (error: Error) => {
      const at = waiting.indexOf(handedOver);
      if (at >= 0) waiting.splice(at, 1);
      stopWaiting();
      reject(error);
    };
    const onAbort = () => giveUp(abortedBy(signal));
    const timer = setTimeout(
      () => giveUp(busy('HTML uploads waited too long to be converted: retry shortly')),
      timeoutMs,
    );
    const stopWaiting = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    waiting.push(handedOver);
  });
}

function release(): void {
  const next = waiting.shift();
  if (next) next();
  else running -= 1;
}

/** One conversion in a worker of its own: ended at the time limit or when the client goes. */
function convertInWorker(html: string, timeoutMs: number, signal?: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { module: HTML_TO_TEXT, html, options: CONVERT_OPTIONS },
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
    });
    let settled = false;
    const onAbort = () => settle(() => reject(abortedBy(signal)));
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
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
    signal?.addEventListener('abort', onAbort, { once: true });
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

export interface HtmlConversion {
  /** Whose upload it is: each organization has at most PER_ORGANIZATION conversions here. */
  organizationId: string;
  /** Aborted when the client goes: a waiting conversion leaves the queue, a running one ends. */
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * The text of an HTML document, reduced off the event loop: a worker thread per conversion, at
 * most HTML_CONVERSIONS_AT_ONCE at a time, each ended after `timeoutMs` (400 naming `file`).
 * An organization with a conversion under way, a full queue, or a wait past `timeoutMs` → 429.
 */
export async function htmlToText(
  html: string,
  { organizationId, signal, timeoutMs = HTML_CONVERSION_TIMEOUT_MS }: HtmlConversion,
): Promise<string> {
  const held = heldByOrganization.get(organizationId) ?? 0;
  if (held >= PER_ORGANIZATION) {
    throw busy('Another HTML upload of this organization is being converted: retry shortly');
  }
  heldByOrganization.set(organizationId, held + 1);
  try {
    signal?.throwIfAborted();
    await slot(timeoutMs, signal);
    try {
      return await convertInWorker(html, timeoutMs, signal);
    } finally {
      release();
    }
  } finally {
    const left = (heldByOrganization.get(organizationId) ?? 1) - 1;
    if (left === 0) heldByOrganization.delete(organizationId);
    else heldByOrganization.set(organizationId, left);
  }
}
