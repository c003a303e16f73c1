import { createServer } from 'node:net';

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Whether `GET path` answers 200 at `host:port`; false when nothing listens there. Linux routes
 * all of 127.0.0.0/8 to loopback, so 127.0.0.2 tells a server bound to 127.0.0.1 from one bound
 * to every interface.
 */
export async function answersAt(host: string, port: number, path: string): Promise<boolean> {
  try {
    return (await fetch(`http://${host}:${port}${path}`)).status === 200;
  } catch {
    return false;
  }
}
