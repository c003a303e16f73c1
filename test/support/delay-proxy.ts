import { createServer, type Server, type Socket, connect } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface DelayProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /** `redis://127.0.0.1:<port>` for a Redis behind it. */
  url: string;
  /** Holds every piece the server sends back for `ms` before passing it on (0: at once). */
  setDelay(ms: number): void;
  /** While true, a new connection is closed as it opens (the ones open stay): no new session. */
  setRefusing(refusing: boolean): void;
  /**
   * While true, nothing passes either way and nothing is closed: a server or a path to it gone
   * silent (a hung host, a black-holed route), which no socket error reports.
   */
  setSilent(silent: boolean): void;
  close(): Promise<void>;
}

interface Held {
  at: number;
  chunk: Buffer;
}

/**
 * A TCP proxy on loopback in front of `target`: what clients send goes through at once, what the
 * server answers is held back by the current delay, in order. In front of Redis it makes a slow
 * Redis (every reply late, the connection up), which SIGSTOP cannot: a stopped process answers
 * nothing at all, and not even its PINGs come back. Refusing new connections, it makes a server
 * that has no session left to give (PostgreSQL at max_connections) while the open ones work.
 */
export async function startDelayProxy(target: { host: string; port: number }): Promise<DelayProxy> {
  let delayMs = 0;
  let refusing = false;
  let silent = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    sockets.add(client).add(upstream);
    const queue: Held[] = [];
    let timer: NodeJS.Timeout | undefined;
    const flush = () => {
      timer = undefined;
      const now = Date.now();
      while (queue.length > 0 && queue[0].at <= now) {
        if (!client.destroyed) client.write(queue.shift()!.chunk);
        else queue.shift();
      }
      if (queue.length > 0) timer = setTimeout(flush, queue[0].at - now);
    };
    upstream.on('data', (chunk: Buffer) => {
      if (silent) return;
      if (delayMs === 0 && queue.length === 0) {
        client.write(chunk);
        return;
      }
      // Never before a piece held earlier: a shorter delay set meanwhile keeps the order.
      const at = Math.max(Date.now() + delayMs, queue.at(-1)?.at ?? 0);
      queue.push({ at, chunk });
      timer ??= setTimeout(flush, at - Date.now());
    });
    client.on('data', (chunk: Buffer) => {
      if (!silent) upstream.write(chunk);
    });
    const end = () => {
      clearTimeout(timer);
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    for (const socket of [client, upstream]) {
      socket.on('error', end);
      socket.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    setDelay: (ms) => {
      delayMs = ms;
    },
    setRefusing: (value) => {
      refusing = value;
    },
    setSilent: (value) => {
      silent = value;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
