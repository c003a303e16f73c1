import { AppError } from '../common/errors/app-error';
import {
  HTML_CONVERSIONS_AT_ONCE,
  HTML_CONVERSIONS_WAITING,
  HTML_MAX_DEPTH,
  htmlToText,
} from './html-text';

/**
 * Markup the parser spends seconds on (its cost grows with the square of the depth): refused at
 * HTML_MAX_DEPTH, so the tests that need a conversion running to its time limit lift the bound.
 */
const SLOW = '<div>a'.repeat(200_000);
const UNBOUNDED = { maxDepth: Infinity };

async function refusal(conversion: Promise<unknown>): Promise<AppError> {
  const error = await conversion.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe('htmlToText', () => {
  it('reduces HTML to its text in a worker', async () => {
    await expect(
      htmlToText('<h1>Hours</h1><p>We open at <b>9</b>.</p><script>x()</script>', {
        account: 'org-a',
      }),
    ).resolves.toBe('Hours\n\nWe open at 9.');
  });

  it("keeps list items, table rows and definitions apart, a row's cells on one line", async () => {
    const page =
      '<p>Prices:</p><ul><li>apples</li><li>oranges</li></ul><ol><li>first</li><li>second</li></ol>' +
      '<table><tr><th>Day</th><th>Open</th></tr><tr><td>Monday</td><td>9:00</td></tr>' +
      '<tr><td>Tuesday</td><td></td><td></td><td>10:00</td></tr></table>' +
      '<dl><dt>Returns</dt><dd>within 30 days</dd></dl><figure>x<figcaption>Our shop</figcaption></figure>';
    await expect(htmlToText(page, { account: 'lists' })).resolves.toBe(
      'Prices:\n\napples\noranges\n\nfirst\nsecond\n\nDay Open\nMonday 9:00\nTuesday 10:00\n\n' +
        'Returns\nwithin 30 days\nx\nOur shop',
    );
  });

  it('refuses a page nested deeper than HTML_MAX_DEPTH before it ties up a slot', async () => {
    // No time limit to fall back on: the refusal comes from the depth reached, not the clock.
    for (const deep of [SLOW, '<ul><li>'.repeat(HTML_MAX_DEPTH), '<p><b>'.repeat(HTML_MAX_DEPTH)]) {
      const error = await refusal(htmlToText(deep, { account: 'deep', timeoutMs: 60_000 }));
      expect(error.code).toBe('validation_failed');
      expect(JSON.stringify(error.details)).toContain(`nested more than ${HTML_MAX_DEPTH}`);
    }
  });

  it('counts the nesting the parser makes, not the tags: implied and explicit closes', async () => {
    // Each <p> closes the one before it, and closed elements leave the depth: both convert.
    const paragraphs = '<p>Open daily'.repeat(HTML_MAX_DEPTH * 2);
    const closed =
      '<blockquote>'.repeat(HTML_MAX_DEPTH - 1) + 'x' + '</blockquote>'.repeat(HTML_MAX_DEPTH - 1);
    await expect(htmlToText(paragraphs, { account: 'flat' })).resolves.toContain('Open daily');
    await expect(htmlToText(closed.repeat(3), { account: 'closed' })).resolves.toContain('x');
  });

  it('writes quotes, lists and headings as plain blocks: no mark redone per level and line', async () => {
    // 100 quotes (or lists) around 20,000 paragraphs made 53 MB of text in 9 s; 150 headings
    // took 3 s; a rule was 40 dashes (found by review).
    for (const [open, item] of [
      ['<blockquote>', '<p>a</p>'],
      ['<ul><li>', '<p>a</p>'],
      ['<ol><li>', '<li>a</li>'],
      ['<h1>', 'a '],
      ['<div>', '<hr>'],
    ]) {
      const page = open.repeat(100) + item.repeat(20_000);
      const text = await htmlToText(page, { account: 'marks', timeoutMs: 60_000 });
      expect(text.length).toBeLessThanOrEqual(page.length);
      expect(text).not.toMatch(/^[>*\d. -]{3}|A/m);
    }
  });

  it('runs one conversion per account, and bounds the queue and the wait (429)', async () => {
    const timeoutMs = 1_500;
    // The slots taken by accounts of their own.
    const running = Array.from({ length: HTML_CONVERSIONS_AT_ONCE }, (_, i) =>
      refusal(htmlToText(SLOW, { account: `running-${i}`, timeoutMs, ...UNBOUNDED })),
    );
    const sameAccount = await refusal(htmlToText('<p>x</p>', { account: 'running-0', timeoutMs }));
    expect(sameAccount.code).toBe('rate_limited');
    expect(sameAccount.headers).toEqual({ 'Retry-After': '5' });

    // Waiters up to the bound; one more is refused at once, one that leaves frees its place.
    const left = new AbortController();
    const leaving = htmlToText('<p>x</p>', {
      account: 'leaving',
      timeoutMs: 60_000,
      signal: left.signal,
    }).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    const waiting = Array.from({ length: HTML_CONVERSIONS_WAITING - 1 }, (_, i) =>
      htmlToText('<p>waited</p>', { account: `waiting-${i}`, timeoutMs: 60_000 }),
    );
    const full = await refusal(htmlToText('<p>x</p>', { account: 'late', timeoutMs }));
    expect(full.code).toBe('rate_limited');
    left.abort(new Error('gone'));
    await expect(leaving).resolves.toEqual(new Error('gone'));
    const tooLong = refusal(htmlToText('<p>x</p>', { account: 'patient', timeoutMs: 200 }));
    expect((await tooLong).code).toBe('rate_limited');

    // The running ones end at their limit (400); the waiters then get the slots and finish.
    for (const error of await Promise.all(running)) expect(error.code).toBe('validation_failed');
    await expect(Promise.all(waiting)).resolves.toEqual(
      Array.from({ length: HTML_CONVERSIONS_WAITING - 1 }, () => 'waited'),
    );
  }, 30_000);

  it('ends a running conversion when its client goes', async () => {
    const gone = new AbortController();
    const started = Date.now();
    const conversion = htmlToText(SLOW, {
      ...UNBOUNDED,
      account: 'org-gone',
      timeoutMs: 20_000,
      signal: gone.signal,
    });
    setTimeout(() => gone.abort(new Error('client left')), 200);
    await expect(conversion).rejects.toThrow('client left');
    expect(Date.now() - started).toBeLessThan(5_000);
    // Its slot and its account's place are free again.
    await expect(htmlToText('<p>again</p>', { account: 'org-gone' })).resolves.toBe('again');
  });
});
