import { ServerSentEvents, STREAM_BUFFER_BYTES } from './server-sent-events';

describe('ServerSentEvents', () => {
  it('waits while the client reads nothing, and leaves no listener behind each wait', async () => {
    const events = new ServerSentEvents();
    const listeners = () =>
      events.stream.listenerCount('close') + events.stream.listenerCount('error');
    const before = listeners();
    const piece = 'x'.repeat(STREAM_BUFFER_BYTES);
    for (let wait = 0; wait < 50; wait++) {
      let sent = false;
      const sending = events.send('delta', { text: piece }).then(() => (sent = true));
      await new Promise((resolve) => setImmediate(resolve));
      expect(sent).toBe(false); // full: the producer waits for the client
      while (events.stream.read() !== null); // the client reads everything
      await sending;
    }
    expect(listeners()).toBe(before);
  });

  it('stops waiting when the stream is cut while full', async () => {
    const events = new ServerSentEvents();
    const sending = events.send('delta', { text: 'x'.repeat(STREAM_BUFFER_BYTES) });
    events.stream.destroy();
    await expect(sending).resolves.toBeUndefined();
  });
});
