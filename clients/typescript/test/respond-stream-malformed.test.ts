import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  PersonalityApi,
  PersonalityApiError,
  type RespondStreamEvent,
} from '@personality-api/client';

/**
 * `respondStream` against a server that answers malformed streams (contract §29): a tiny local
 * HTTP server stands in for the service, choosing the stream by the request's `message`. Every
 * malformed event ends in a PersonalityApiError, never a SyntaxError, a TypeError, a skipped
 * event or a buffer that grows without bound.
 */
const MiB = 1024 * 1024;
const REQUEST_ID = '01JD0000000000000000000042';
const ANSWER = {
  personality_id: '6f1c2a9e-3b7d-4e8a-9c1f-2d3e4f5a6b7c',
  user_id: 'customer-42',
  reply: {
    text: 'Hello there',
    emotion: { name: 'joy', intensity: 0.5 },
  },
  model: null,
  vocabulary_version: '2.0.0',
  safety: { flagged: false, categories: [], action: 'none' },
  created_at: '2026-11-22T01:23:45.678Z',
};
const event = (name: string, data: string) => `event: ${name}\ndata: ${data}\n\n`;
const done = event('done', JSON.stringify(ANSWER));

/** Writes one stream; the simple ones answer what `response.end` does. */
type Script = (response: ServerResponse) => Promise<void> | ServerResponse;

/** What the server saw of the endless stream: how much it wrote before the client hung up. */
const endless = { written: 0, closedEarly: false, closed: Promise.resolve() };

/** Writes `text` and waits while the socket is full, as a server that respects backpressure. */
async function write(response: ServerResponse, text: string | Buffer): Promise<boolean> {
  if (response.destroyed) return false;
  if (response.write(text)) return true;
  const settled = new AbortController();
  const { signal } = settled;
  await Promise.race([once(response, 'drain', { signal }), once(response, 'close', { signal })]);
  settled.abort();
  return !response.destroyed;
}

const streams: Record<string, Script> = {
  'bad json': (response) => response.end(event('delta', '{"text": "Hel')),
  'delta without text': (response) => response.end(event('delta', '{}')),
  'delta with a number': (response) => response.end(event('delta', '{"text": 5}')),
  'delta of null': (response) => response.end(event('delta', 'null')),
  'done with a string': (response) => response.end(event('done', '"ok"')),
  'done without reply': (response) => response.end(event('done', '{}')),
  'done of null': (response) => response.end(event('done', 'null')),
  'error without envelope': (response) =>
    response.end(event('error', '{"message": "it broke"}') + done),
  'a delta, then bad json': (response) =>
    response.end(event('delta', '{"text": "Hel"}') + event('delta', 'lo')),
  'ends before done': (response) => response.end(event('delta', '{"text": "Hel"}')),
  'unknown events and comments': (response) =>
    response.end(': ok\n\n' + event('ping', 'not json at all') + done),
  'a line of just under 1 MiB': (response) =>
    response.end(event('delta', JSON.stringify({ text: 'a'.repeat(MiB - 100) })) + done),
  'many events, 4 MiB in all': async (response) => {
    const piece = event('delta', JSON.stringify({ text: 'b'.repeat(256 * 1024) }));
    for (let i = 0; i < 16; i++) await write(response, piece);
    response.end(done);
  },
  'CRLF line breaks split across writes, 4 MiB in all': async (response) => {
    const piece = `event: delta\r\ndata: ${JSON.stringify({ text: 'c'.repeat(256 * 1024) })}\r\n\r\n`;
    for (let i = 0; i < 16; i++) {
      // Each CR ends one write and its LF begins the next.
      for (const part of piece.split(/(?<=\r)/)) await write(response, part);
    }
    response.end(done.replace(/\n/g, '\r\n'));
  },
  'comments of 2 MiB between events': async (response) => {
    await write(response, event('delta', '{"text": "Hel"}'));
    for (let i = 0; i < 2048; i++) await write(response, `: ${'p'.repeat(1020)}\n`);
    response.end(done);
  },
  'an event of 2 MiB in short data lines': async (response) => {
    await write(response, 'event: delta\n');
    for (let i = 0; i < 2048; i++) await write(response, `data: ${'d'.repeat(1018)}\n`);
    response.end(done);
  },
  'a comment line of 2 MiB': async (response) => {
    await write(response, ': ');
    for (let i = 0; i < 32; i++) await write(response, 'k'.repeat(64 * 1024));
    response.end('\n\n' + done);
  },
  'an endless line': async (response) => {
    // 2 MiB without a line break, then more until the client hangs up (at most 64 MiB).
    let closed!: () => void;
    endless.written = 0;
    endless.closedEarly = false;
    endless.closed = new Promise((resolve) => (closed = resolve));
    const chunk = Buffer.alloc(64 * 1024, 'x');
    response.on('close', () => {
      endless.closedEarly = !response.writableFinished;
      closed();
    });
    await write(response, 'event: delta\ndata: {"text": "');
    while (endless.written < 64 * MiB) {
      if (!(await write(response, chunk))) return;
      endless.written += chunk.length;
    }
    response.end('"}\n\n' + done);
  },
};

const replays: Record<string, string> = {
  'a replay that is not JSON': '{"reply": ',
  'a replay that is not an answer': '[1, 2, 3]',
  'a replay': JSON.stringify(ANSWER),
};

async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const { message } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { message: string };
  const replay = replays[message];
  if (replay !== undefined) {
    response.writeHead(200, { 'content-type': 'application/json', 'x-request-id': REQUEST_ID });
    response.end(replay);
    return;
  }
  const script = streams[message];
  if (script === undefined) {
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'x-request-id': REQUEST_ID,
  });
  await script(response);
}

describe('respondStream against malformed streams', () => {
  let server: Server;
  let api: PersonalityApi;

  before(async () => {
    server = createServer((request, response) => {
      handle(request, response).catch((error: unknown) => response.destroy(error as Error));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    api = new PersonalityApi({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: 'pk_test',
      maxRetries: 0,
    });
  });

  after(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });

  /** The stream the server sends for `message`, read to its end: the events, or what it threw. */
  async function read(message: string): Promise<{ events: RespondStreamEvent[]; error?: unknown }> {
    const events: RespondStreamEvent[] = [];
    try {
      for await (const streamed of api.respondStream({
        personality_id: ANSWER.personality_id,
        user_id: ANSWER.user_id,
        message,
      })) {
        events.push(streamed);
      }
      return { events };
    } catch (error) {
      return { events, error };
    }
  }

  function assertRefused(error: unknown, code: string, message?: RegExp): void {
    assert.ok(
      error instanceof PersonalityApiError,
      `expected a PersonalityApiError, got ${String(error)}`,
    );
    assert.equal(error.code, code);
    assert.equal(error.status, 200);
    assert.equal(error.requestId, REQUEST_ID);
    if (message) assert.match(error.message, message);
  }

  for (const message of [
    'bad json',
    'delta without text',
    'delta with a number',
    'delta of null',
    'done with a string',
    'done without reply',
    'done of null',
    'error without envelope',
  ]) {
    it(`${message}: throws PersonalityApiError invalid_stream_event`, async () => {
      const { events, error } = await read(message);
      assert.deepEqual(events, []);
      assertRefused(error, 'invalid_stream_event');
    });
  }

  it('a delta, then bad json: yields the delta, then throws invalid_stream_event', async () => {
    const { events, error } = await read('a delta, then bad json');
    assert.deepEqual(events, [{ type: 'delta', text: 'Hel' }]);
    assertRefused(error, 'invalid_stream_event', /delta/);
  });

  it('a stream that ends before done or error: throws incomplete_stream', async () => {
    const { events, error } = await read('ends before done');
    assert.deepEqual(events, [{ type: 'delta', text: 'Hel' }]);
    assertRefused(error, 'incomplete_stream');
  });

  it('an endless line: throws after 1 MiB and stops reading', async () => {
    const { events, error } = await read('an endless line');
    // Types only: the unbounded client's one event held the whole 64 MiB.
    assert.deepEqual(
      events.map((streamed) => streamed.type),
      [],
    );
    assertRefused(error, 'invalid_stream_event', /1 MiB/);
    await endless.closed;
    // The client hung up: the server never got to write its 64 MiB.
    assert.equal(endless.closedEarly, true);
    assert.ok(endless.written >= 2 * MiB, `the server wrote ${endless.written} bytes`);
    assert.ok(endless.written < 32 * MiB, `the server wrote ${endless.written} bytes`);
  });

  it('an event of 2 MiB in short data lines: throws invalid_stream_event', async () => {
    const { events, error } = await read('an event of 2 MiB in short data lines');
    assert.deepEqual(events, []);
    assertRefused(error, 'invalid_stream_event', /1 MiB/);
  });

  it('a comment line of 2 MiB: throws invalid_stream_event', async () => {
    const { error } = await read('a comment line of 2 MiB');
    assertRefused(error, 'invalid_stream_event', /1 MiB/);
  });

  it('a line of just under 1 MiB is read', async () => {
    const { events, error } = await read('a line of just under 1 MiB');
    assert.equal(error, undefined);
    assert.deepEqual(
      events.map((streamed) => streamed.type),
      ['delta', 'done'],
    );
    assert.equal(events[0]?.type === 'delta' && events[0].text.length, MiB - 100);
  });

  for (const message of [
    'many events, 4 MiB in all',
    'CRLF line breaks split across writes, 4 MiB in all',
  ]) {
    it(`${message}: the limit is per event, not per stream`, async () => {
      const { events, error } = await read(message);
      assert.equal(error, undefined);
      assert.equal(events.length, 17);
      assert.equal(events.filter((streamed) => streamed.type === 'delta').length, 16);
      assert.deepEqual(events.at(-1), { type: 'done', answer: ANSWER });
    });
  }

  it('comments between events do not count toward an event', async () => {
    const { events, error } = await read('comments of 2 MiB between events');
    assert.equal(error, undefined);
    assert.deepEqual(events, [
      { type: 'delta', text: 'Hel' },
      { type: 'done', answer: ANSWER },
    ]);
  });

  it('events of other names are passed over', async () => {
    const { events, error } = await read('unknown events and comments');
    assert.equal(error, undefined);
    assert.deepEqual(events, [{ type: 'done', answer: ANSWER }]);
  });

  it('a replayed JSON answer is checked like a done event', async () => {
    assert.deepEqual(await read('a replay'), {
      events: [{ type: 'done', answer: ANSWER }],
    });
    for (const message of ['a replay that is not JSON', 'a replay that is not an answer']) {
      const { events, error } = await read(message);
      assert.deepEqual(events, []);
      assertRefused(error, 'invalid_stream_event');
    }
  });
});
