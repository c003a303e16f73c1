import { Client } from 'pg';

/** pg's own failure of a statement unanswered within its client-side timeout (query_timeout). */
function isReadTimeout(error: unknown): boolean {
  return (error as Error | null)?.message === 'Query read timeout';
}

/**
 * pg's Client, ending its session when a statement goes unanswered past query_timeout (a server,
 * or the path to it, gone silent). pg fails the statement but keeps the session waiting for its
 * answer: every later statement would queue behind it, and a pool given it back (TypeORM gives a
 * transaction's session back without the error) would hand it out again (found by review: a
 * black-holed database left the pool's sessions stuck after it came back). Ending it destroys its
 * socket (pg does, with a statement in flight), and pools drop a session that is ending.
 * Every pool of the service is made with it (`Client` in the pool's options).
 */
export class DatabaseClient extends Client {
  override query(...args: unknown[]): never {
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      args[last] = (error: unknown, ...rest: unknown[]) => {
        this.endIfUnanswered(error);
        return (callback as (...values: unknown[]) => unknown)(error, ...rest);
      };
    }
    const result = (super.query as (...values: unknown[]) => unknown)(...args);
    if (result instanceof Promise) result.catch((error: unknown) => this.endIfUnanswered(error));
    return result as never;
  }

  /**
   * At once, before whoever sent the statement goes on: TypeORM's repository path gives the
   * session back right after, and a pool takes back a session not yet ending (review of the
   * change: ended on the next tick, it sat idle in the pool, closed). pg has run its timeout's
   * own handling by then; the session's end destroys its socket.
   */
  private endIfUnanswered(error: unknown): void {
    if (isReadTimeout(error)) void this.end().catch(() => undefined);
  }
}
