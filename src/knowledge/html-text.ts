import { Worker } from 'node:worker_threads';
import { Slots } from '../common/concurrency/slots';
import { AppError } from '../common/errors/app-error';

/**
 * How long reducing one uploaded HTML file to text may take. The 1 MiB pages measured within
 * HTML_MAX_DEPTH take under half a second; this bounds what no measure foresaw
 * (docs/knowledge.md#html).
 */
export const HTML_CONVERSION_TIMEOUT_MS = 5_000;

/**
 * How deep a page's elements may nest, as the parser nests them (implied closes counted). The
 * parser's and the converter's cost grows with the square of the depth: 200,000 unclosed
 * `<div>`s took 9 s to parse and then overflowed the stack, and kept a conversion slot all along
 * (found by review). Deeper pages are refused as soon as the parse reaches this depth.
 */
export const HTML_MAX_DEPTH = 1_000;

/** Conversions running at once in this process; more wait for a free one. */
export const HTML_CONVERSIONS_AT_ONCE = 2;

/** Conversions waiting for a slot in this process; past this an upload is refused at once. */
export const HTML_CONVERSIONS_WAITING = 8;

/**
 * Conversions one account (the user who made an organization: OrganizationsService.accountOf) may
 * have running or waiting in this process, all its organizations together: one tenant's hostile
 * pages hold at most one of the places, so another's upload always has one to wait for. Per
 * organization, one user's ten organizations held all ten, and every other tenant's HTML upload
 * was refused (found by review).
 */
const PER_ACCOUNT = 1;

/** A conversion's heap: 1 MiB of HTML takes about 60 MiB; past this the worker is ended. */
const WORKER_HEAP_MB = 192;

/**
 * The worker's code, given as source (eval) so that it runs the same from src/ under ts-jest and
 * from dist/ once built; html-to-text is required by the path this module resolves.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { convert } = require(workerData.converter);
const { Parser } = require(workerData.parser);
const tooDeep = new Error('too deep');
let depth = 0;
const parser = new Parser({
  onopentagname() {
    if (++depth > workerData.maxDepth) throw tooDeep;
  },
  onclosetag() {
    depth -= 1;
  },
});
try {
  parser.end(workerData.html);
  // Cells end in a space (CONVERT_OPTIONS): one space between words, none at a line's end.
  const text = convert(workerData.html, workerData.options)
    .replace(/ {2,}/g, ' ')
    .replace(/ \\n/g, '\\n')
    .replace(/ $/, '');
  parentPort.postMessage({ text });
} catch (error) {
  parentPort.postMessage(error === tooDeep ? { tooDeep: true } : { failed: String(error && error.message) });
}`;

/**
 * Scripts, styles and images carry no text a reader sees; block elements keep their breaks.
 * Quotes, lists and headings are plain blocks, without `> `, an indented bullet or capitals,
 * and a rule is nothing: the converter redoes those on every line (or word) for every level, so
 * 100 nested quotes around 1 MiB of paragraphs took 9 s and made 53 MB of text, 999 made 350 MB
 * in 175 s, 150 nested headings took 3 s, and 1 MiB of `<hr>` made 11 MB of dashes (found by
 * two reviews). Search reads the words, not the marks.
 */
const CONVERT_OPTIONS = {
  wordwrap: false,
  selectors: [
    { selector: 'a', options: { ignoreHref: true } },
    { selector: 'img', format: 'skip' },
    ...['blockquote', 'ul', 'ol', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr'].map((selector) => ({
      selector,
      format: 'block',
    })),
    // A line each, or the converter's default (inline) glued neighbours into one word: a price
    // list's "applesoranges", an opening-hours table's "Monday9:00Tuesday10:00", which search
    // could not find (found by review).
    ...[
      'li',
      'tr',
      'dt',
      'dd',
      'caption',
      'figcaption',
      'address',
      'details',
      'summary',
      'fieldset',
      'legend',
      'center',
      'menu',
      'dir',
      'dialog',
      'option',
    ].map((selector) => ({
      selector,
      format: 'block',
      options: { leadingLineBreaks: 1, trailingLineBreaks: 1 },
    })),
    // A row's cells on its line, a space apart: "Monday 9:00".
    ...['td', 'th'].map((selector) => ({
      selector,
      format: 'inlineSurround',
      options: { prefix: '', suffix: ' ' },
    })),
  ],
};

const HTML_TO_TEXT = require.resolve('html-to-text');
/** The parser html-to-text itself uses, so that the depth measured is the depth it would reach. */
const HTMLPARSER2 = require.resolve('htmlparser2', { paths: [HTML_TO_TEXT] });

const refused = (problem: string) => AppError.validation([{ field: 'file', problem }]);

/** 429 with Retry-After: the conversions this process runs are taken; a retry finds one free. */
const busy = (message: string) =>
  new AppError('rate_limited', message, {
    headers: { 'Retry-After': String(Math.ceil(HTML_CONVERSION_TIMEOUT_MS / 1000)) },
  });

/** Why a conversion stopped when its client went (nobody reads it: the response is gone). */
const abortedBy = (signal?: AbortSignal): Error =>
  signal?.reason instanceof Error ? signal.reason : new Error('the client went');

const FULL = () => busy('Too many HTML uploads are being converted: retry shortly');
const TOO_LONG = () => busy('HTML uploads waited too long to be converted: retry shortly');

/** The conversions of this process: a waiting upload holds its body, so the queue is bounded. */
const conversions = new Slots(HTML_CONVERSIONS_AT_ONCE, HTML_CONVERSIONS_WAITING);
const heldByAccount = new Map<string, number>();

/** One conversion in a worker of its own: ended at the time limit or when the client goes. */
function convertInWorker(
  html: string,
  { timeoutMs, maxDepth, signal }: { timeoutMs: number; maxDepth: number; signal?: AbortSignal },
): Promise<string> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        converter: HTML_TO_TEXT,
        parser: HTMLPARSER2,
        maxDepth,
        html,
        options: CONVERT_OPTIONS,
      },
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
    worker.on('message', (message: { text?: string; tooDeep?: true }) =>
      settle(() =>
        message.text !== undefined
          ? resolve(message.text)
          : message.tooDeep
            ? reject(refused(`is HTML nested more than ${maxDepth} elements deep`))
            : reject(refused('is HTML that cannot be reduced to text')),
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
  /** Whose upload it is: each account has at most PER_ACCOUNT conversions here. */
  account: string;
  /** Aborted when the client goes: a waiting conversion leaves the queue, a running one ends. */
  signal?: AbortSignal;
  timeoutMs?: number;
  /** HTML_MAX_DEPTH unless a test needs a conversion that runs to its time limit. */
  maxDepth?: number;
}

/**
 * The text of an HTML document, reduced off the event loop: a worker thread per conversion, at
 * most HTML_CONVERSIONS_AT_ONCE at a time, each ended after `timeoutMs` or past `maxDepth`
 * (400 naming `file`).
 * An account with a conversion under way, a full queue, or a wait past `timeoutMs` → 429.
 */
export async function htmlToText(
  html: string,
  {
    account,
    signal,
    timeoutMs = HTML_CONVERSION_TIMEOUT_MS,
    maxDepth = HTML_MAX_DEPTH,
  }: HtmlConversion,
): Promise<string> {
  const held = heldByAccount.get(account) ?? 0;
  if (held >= PER_ACCOUNT) {
    throw busy(
      'Another HTML upload of this organization, or of another made by the same user, is being converted: retry shortly',
    );
  }
  heldByAccount.set(account, held + 1);
  try {
    return await conversions.run({ timeoutMs, signal, full: FULL, tooLong: TOO_LONG }, () =>
      convertInWorker(html, { timeoutMs, maxDepth, signal }),
    );
  } finally {
    const left = (heldByAccount.get(account) ?? 1) - 1;
    if (left === 0) heldByAccount.delete(account);
    else heldByAccount.set(account, left);
  }
}
