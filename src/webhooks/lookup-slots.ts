import { lookup as dnsLookup, type LookupAddress } from 'node:dns';

/** Resolves every address of a name (all families); rejects with the resolver's error. */
export type ResolveFunction = (host: string) => Promise<LookupAddress[]>;

/** Every address `host` resolves to (all families), through the system resolver. */
export function systemResolve(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) =>
    dnsLookup(host, { all: true, order: 'verbatim' }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    ),
  );
}

interface Waiter {
  host: string;
  owner: string;
  resolve: (addresses: LookupAddress[]) => void;
  reject: (error: unknown) => void;
  timer: NodeJS.Timeout;
}

/**
 * Name lookups of hosts a tenant chose, bounded. The system resolver (getaddrinfo) runs on
 * libuv's thread pool, which argon2, files and zlib share; it cannot be cancelled, and a name
 * whose nameserver never answers holds its thread for the resolver's whole timeout. Unbounded,
 * one tenant creating endpoints on such names could hold every thread of the pool.
 *
 * So at most `capacity` lookups run at once, one owner (an organization) runs at most
 * `perOwner` of them, and a caller waits at most its deadline. A lookup that outlives its
 * caller keeps its slot until the resolver returns: the thread is taken until then.
 */
export class LookupSlots {
  private running = 0;
  private readonly runningByOwner = new Map<string, number>();
  private readonly queue: Waiter[] = [];

  constructor(
    private readonly capacity: number,
    private readonly perOwner: number,
    private readonly resolveName: ResolveFunction = systemResolve,
  ) {}

  /**
   * Every address `host` resolves to. Rejects with the resolver's error, or with an ETIMEOUT
   * error when no answer came within `timeoutMs` (waiting for a slot included).
   */
  resolve(host: string, owner: string, timeoutMs: number): Promise<LookupAddress[]> {
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        host,
        owner,
        resolve,
        reject,
        timer: setTimeout(() => {
          const queued = this.queue.indexOf(waiter);
          if (queued !== -1) this.queue.splice(queued, 1);
          reject(timedOut(host, timeoutMs));
        }, timeoutMs),
      };
      this.queue.push(waiter);
      this.startWaiting();
    });
  }

  /** Starts the first queued lookups whose owners have a slot left, while slots are free. */
  private startWaiting(): void {
    for (let index = 0; index < this.queue.length && this.running < this.capacity;) {
      const waiter = this.queue[index];
      if ((this.runningByOwner.get(waiter.owner) ?? 0) >= this.perOwner) {
        index += 1;
        continue;
      }
      this.queue.splice(index, 1);
      this.start(waiter);
    }
  }

  private start(waiter: Waiter): void {
    const { owner } = waiter;
    this.running += 1;
    this.runningByOwner.set(owner, (this.runningByOwner.get(owner) ?? 0) + 1);
    const settle = (answer: () => void) => {
      clearTimeout(waiter.timer);
      this.running -= 1;
      const left = (this.runningByOwner.get(owner) ?? 1) - 1;
      if (left === 0) this.runningByOwner.delete(owner);
      else this.runningByOwner.set(owner, left);
      answer();
      this.startWaiting();
    };
    this.resolveName(waiter.host).then(
      (addresses) => settle(() => waiter.resolve(addresses)),
      (error: unknown) => settle(() => waiter.reject(error)),
    );
  }
}

/** The error of a lookup given up on: a resolver that could not answer, not a missing name. */
function timedOut(host: string, timeoutMs: number): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(`looking up ${host} took over ${timeoutMs} ms`);
  error.code = 'ETIMEOUT';
  return error;
}

/** libuv's thread pool size (UV_THREADPOOL_SIZE, 4 unless set). */
function threadPoolSize(): number {
  const configured = Number(process.env.UV_THREADPOOL_SIZE);
  return Number.isInteger(configured) && configured > 0 ? configured : 4;
}

/**
 * The process's webhook lookups: half of libuv's thread pool, one at a time per organization.
 * One instance per process because the pool it protects is per process.
 */
export const webhookLookups = new LookupSlots(Math.max(1, Math.floor(threadPoolSize() / 2)), 1);
