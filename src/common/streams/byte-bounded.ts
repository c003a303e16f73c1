import { Readable } from 'node:stream';
import { STREAM_BUFFER_BYTES } from '../http/server-sent-events';

/**
 * A readable of `chunks` that reads ahead of a slow client until it holds STREAM_BUFFER_BYTES
 * (contract §25), whatever the size of a chunk: counted in bytes, not chunks, so one long row
 * cannot multiply what is held (the last chunk read may pass the bound once).
 */
export function byteBoundedReadable(chunks: AsyncIterable<string>): Readable {
  return Readable.from(chunks, { objectMode: false, highWaterMark: STREAM_BUFFER_BYTES });
}
