import { EventSourceParserStream, type EventSourceMessage } from 'eventsource-parser/stream';

/** The most one event may hold: its lines up to the blank line that ends it (contract §29). */
export const MAX_EVENT_BYTES = 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;

/**
 * The server-sent events of `body`, parsed by eventsource-parser. An event (or a comment line)
 * over `maxBytes` ends the stream with `refuse(…)`'s error, and the body is cancelled, which
 * closes the connection: the parser keeps an unfinished line and event in memory, so a server
 * that never ends one would otherwise grow it without bound.
 */
export function serverSentEvents(
  body: ReadableStream<Uint8Array<ArrayBuffer>>,
  refuse: (message: string) => Error,
  maxBytes = MAX_EVENT_BYTES,
): ReadableStream<EventSourceMessage> {
  return body
    .pipeThrough(eventSizeLimit(maxBytes, refuse))
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream());
}

/** The whole of `body` as text, or `refuse(…)`'s error once it passes `maxBytes`. */
export async function readText(
  body: ReadableStream<Uint8Array<ArrayBuffer>>,
  refuse: (message: string) => Error,
  maxBytes = MAX_EVENT_BYTES,
): Promise<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let size = 0;
  let text = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text + decoder.decode();
      size += value.byteLength;
      if (size > maxBytes) throw refuse(`An answer over ${describeSize(maxBytes)}`);
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/**
 * Passes the bytes on unchanged while counting, by the rules of the SSE format (lines end with
 * CR, LF or CRLF; a blank line ends an event; a line that starts with a colon is a comment, which
 * the parser does not keep), the bytes of the event being received and of its unfinished line.
 */
function eventSizeLimit(
  maxBytes: number,
  refuse: (message: string) => Error,
): TransformStream<Uint8Array<ArrayBuffer>, Uint8Array<ArrayBuffer>> {
  let event = 0;
  let line = 0;
  let comment = false;
  let afterCR = false;
  const check = () => {
    if (line > maxBytes) throw refuse(`A line over ${describeSize(maxBytes)}`);
    if (!comment && event + line > maxBytes)
      throw refuse(`An event over ${describeSize(maxBytes)}`);
  };
  return new TransformStream({
    transform(chunk, controller) {
      for (const byte of chunk) {
        if (byte !== LF && byte !== CR) {
          if (line === 0) comment = byte === COLON;
          line++;
          afterCR = false;
          continue;
        }
        // The LF of a CRLF ends nothing more.
        if (byte === LF && afterCR) {
          afterCR = false;
          continue;
        }
        afterCR = byte === CR;
        check();
        if (line === 0) event = 0;
        else if (!comment) event += line;
        line = 0;
        comment = false;
      }
      check();
      controller.enqueue(chunk);
    },
  });
}

function describeSize(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;
}
