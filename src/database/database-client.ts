import { Client } from 'pg';

/** pg's failure of a statement unanswered within its client-side timeout (query_timeout). */
export function isReadTimeout(error: unknown): boolean {
  const { message, driverError } = (error ?? {}) as { message?: unknown; driverError?: unknown };
  return (
    message === 'Query read timeout' || (driverError !== undefined && isReadTimeout(driverError))
  );
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

  private endIfUnanswered(error: unknown): void {
    // After pg's own handling of the timeout has run.
    if (isReadTimeout(error)) process.nextTick(() => void this.end().catch(() => undefined));
  }
}
