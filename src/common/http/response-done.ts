import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { finished } from 'node:stream';

/** The callbacks waiting for each connection to close: one 'close' listener per connection. */
const waitingByConnection = new WeakMap<Socket, Set<() => void>>();

/**
 * Calls `listener` once, when the response has finished, failed or closed, or its connection has
 * closed, also when that happened before this call (a client that left while the request was
 * still being checked). A pipelined response without a socket yet gets no 'close' of its own,
 * hence the connection's.
 */
export function onResponseDone(response: ServerResponse, listener: () => void): void {
  let settled = false;
  let waiting: Set<() => void> | undefined;
  const settle = () => {
    if (settled) return;
    settled = true;
    waiting?.delete(settle);
    listener();
  };
  finished(response, settle);
  const connection = response.req?.socket;
  if (!connection) return;
  if (connection.destroyed || response.destroyed) {
    process.nextTick(settle);
    return;
  }
  waiting = waitingByConnection.get(connection);
  if (!waiting) {
    const callbacks = new Set<() => void>();
    waitingByConnection.set(connection, callbacks);
    connection.once('close', () => {
      waitingByConnection.delete(connection);
      for (const callback of callbacks) callback();
    });
    waiting = callbacks;
  }
  waiting.add(settle);
}
