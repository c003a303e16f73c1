import { STREAM_BUFFER_BYTES } from '../http/server-sent-events';
import { byteBoundedReadable } from './byte-bounded';

describe('byteBoundedReadable', () => {
  /** Chunks of `size` characters, counting how many were asked for. */
  function counted(size: number) {
    const asked = { chunks: 0 };
    async function* chunks(): AsyncGenerator<string> {
      for (;;) {
        asked.chunks += 1;
        yield await Promise.resolve('é'.repeat(size));
      }
    }
    return { asked, chunks: chunks() };
  }
  const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

  it('reads ahead of a reader that does not read up to its bound in bytes, not in chunks', async () => {
    // 300,000 characters of two bytes: 600 kB a chunk, so two chunks pass 1 MiB.
    const { asked, chunks } = counted(300_000);
    const readable = byteBoundedReadable(chunks);
    readable.pause();
    readable.read(0);
    await settle();
    expect(readable.readableLength).toBeGreaterThanOrEqual(STREAM_BUFFER_BYTES);
    expect(readable.readableLength).toBeLessThan(STREAM_BUFFER_BYTES + 600_000);
    expect(asked.chunks).toBeLessThanOrEqual(3);
    readable.destroy();
  });

  it('gives the text back whole, in UTF-8', async () => {
    async function* words(): AsyncGenerator<string> {
      yield await Promise.resolve('{"a":"é');
      yield '"}';
    }
    let text = '';
    for await (const piece of byteBoundedReadable(words())) text += String(piece);
    expect(text).toBe('{"a":"é"}');
  });
});
