import { STREAM_BUFFER_BYTES, ServerSentEvents } from './server-sent-events';

describe('ServerSentEvents', () => {
  it('writes event blocks with one data line of JSON', async () => {
    const events = new ServerSentEvents();
    await events.send('delta', { text: 'two\nlines' });
    events.comment('ping');
    events.end();
    let body = '';
    for await (const chunk of events.stream) body += String(chunk);
    expect(body).toBe('event: delta\ndata: {"text":"two\\nlines"}\n\n: ping\n\n');
  });

  it('makes its producer wait once about 1 MiB waits for a client that does not read', async () => {
    const events = new ServerSentEvents();
    const piece = 'x'.repeat(16 * 1024);
    let sent = 0;
    let waiting: Promise<void> | undefined;
    while (!waiting) {
      let settled = false;
      const send = events.send('delta', { text: piece }).then(() => {
        settled = true;
      });
      await new Promise((resolve) => setImmediate(resolve));
      if (settled) sent++;
      else waiting = send;
    }
    const buffered = events.stream.writableLength + events.stream.readableLength;
    expect(buffered).toBeLessThanOrEqual(STREAM_BUFFER_BYTES + piece.length * 2);
    expect(buffered).toBeGreaterThan(STREAM_BUFFER_BYTES / 2);
    expect(sent).toBeLessThan(STREAM_BUFFER_BYTES / piece.length + 2);

    // The client reads: the producer goes on.
    events.stream.resume();
    await waiting;
  });

  it('lets a waiting producer go when the stream is cut (client gone, idle timeout)', async () => {
    const events = new ServerSentEvents();
    const piece = 'y'.repeat(64 * 1024);
    let send: Promise<void> = Promise.resolve();
    for (let i = 0; i < 40; i++) send = events.send('delta', { text: piece });
    events.stream.destroy();
    await expect(send).resolves.toBeUndefined();
    // Nothing more is written once it is closed.
    await expect(events.send('done', {})).resolves.toBeUndefined();
  });
});
