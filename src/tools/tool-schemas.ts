import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { AppError } from '../common/errors/app-error';

/**
 * How long one schema's compile (and one validation of arguments) may take in the worker. The
 * slowest 16 KiB schemas found compile in about 0.2 s with the options below; ajv's defaults
 * took 0.9 s for one of them (a `$ref` used 700 times, written out at each use).
 */
export const SCHEMA_COMPILE_TIMEOUT_MS = 2_000;

/** Schemas one organization may have waiting to be checked in this process; past this, 429. */
export const SCHEMAS_WAITING_PER_ORGANIZATION = 64;

/**
 * Checks of arguments one organization may have waiting in this process, counted apart from its
 * schemas: four rounds of MAX_TOOL_CALLS_PER_ROUND, a round's calls being sent at once; past this
 * a call is answered as unchecked. They hold nothing the replies waiting on them do not hold.
 */
export const ARGUMENTS_WAITING_PER_ORGANIZATION = 256;

/**
 * Whose schema it is: the organization's, whose jobs wait in a line of their own, and its account
 * (the user who made it: OrganizationsService.accountOf), which the worker's time is shared by.
 */
export interface SchemaTenant {
  organizationId: string;
  account: string;
}

/** Compiled schemas the worker keeps, and the characters of schema text and code behind them. */
const COMPILED_SCHEMAS_KEPT = 1_000;
const COMPILED_TEXT_KEPT = 32 * 1024 * 1024;

/**
 * The worker's heap: past it the worker dies, its cache with it, and a new one starts. The job
 * it was running is run again on the new one, once, unless it was that worker's first (see
 * ToolSchemas.started).
 */
const WORKER_HEAP_MB = 256;

/**
 * The worker's code, given as source (eval) so that it runs the same from src/ under ts-jest and
 * from dist/ once built. The draft's meta-schema, compiled once, checks each schema; each is then
 * compiled by an ajv instance of its own without meta-schemas: ajv keeps every schema it compiled
 * in its scope, which removeSchema does not empty, and a schema whose `$id` is the meta-schema's
 * would have replaced it for every tenant. Strict mode is off (unknown keywords are common and
 * harmless), and so is ajv's logger: it printed a tenant's unknown `format` to stderr, raw.
 * References are called, not written out at each use, and long enums and required lists are
 * looped over, so that the code ajv writes grows with the schema's text, not with its uses.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Ajv2020 = require(workerData.ajv).default;
const meta = new Ajv2020({ strict: false, allErrors: true, logger: false });
const OPTIONS = {
  strict: false, allErrors: true, meta: false, validateSchema: false, logger: false,
  inlineRefs: false, loopEnum: 8, loopRequired: 8,
};
const compiled = new Map();
let kept = 0;
// A promise no job awaits would end the worker, and fail the job of whoever comes next.
process.on('unhandledRejection', () => {});
// A reference is a function of its own (inlineRefs off), not in the root's code: each one
// reachable from it counts, once, so that a schema of one $ref is not kept as a few bytes.
function codeSize(validate) {
  const seen = new Set();
  let size = 0;
  const visit = (item) => {
    const env = typeof item === 'function' ? item.schemaEnv : item;
    if (!env || typeof env !== 'object' || seen.has(env)) return;
    seen.add(env);
    if (typeof env.validate === 'function') size += env.validate.toString().length;
    for (const ref of Object.values(env.refs || {})) visit(ref);
    for (const ref of Object.values(env.localRefs || {})) visit(ref);
  };
  visit(validate);
  return size;
}
function compile(key, schema, textSize) {
  const found = compiled.get(key);
  if (found) {
    compiled.delete(key);
    compiled.set(key, found);
    return { validate: found.validate, fresh: false };
  }
  let valid;
  try {
    valid = meta.validateSchema(schema);
  } catch (error) {
    // A $schema of another draft names a meta-schema this instance does not have.
    throw new Error('schema is invalid: ' + error.message);
  }
  if (!valid) throw new Error('schema is invalid: ' + meta.errorsText(meta.errors));
  const validate = new Ajv2020(OPTIONS).compile(schema);
  const size = textSize + codeSize(validate);
  kept += size;
  while (compiled.size > 0 && (compiled.size >= workerData.capacity || kept > workerData.textCapacity)) {
    const [oldest, entry] = compiled.entries().next().value;
    compiled.delete(oldest);
    kept -= entry.size;
  }
  compiled.set(key, { validate, size });
  return { validate, fresh: true };
}
parentPort.on('message', (job) => {
  let answer;
  try {
    const { validate, fresh } = compile(job.key, job.schema, job.textSize);
    answer = { fresh };
    if (job.kind === 'validate') {
      const result = validate(job.args);
      // Anything but a boolean (an $async schema's promise) is no answer about the arguments.
      if (typeof result !== 'boolean') throw new Error('does not validate synchronously');
      answer.valid = result;
      const first = validate.errors && validate.errors[0];
      if (first) answer.error = { instancePath: first.instancePath, message: first.message };
    }
  } catch (error) {
    answer = { problem: String((error && error.message) || error) };
  }
  answer.id = job.id;
  parentPort.postMessage(answer);
});
// The meta-schema is compiled at its first use: before the first job's time starts.
meta.validateSchema({ type: 'object' });
parentPort.postMessage({ ready: true });`;

const AJV = require.resolve('ajv/dist/2020');

/** JSON with every object's keys sorted, so that two spellings of one schema are one text. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    item !== null && typeof item === 'object' && !Array.isArray(item)
      ? Object.fromEntries(
          Object.entries(item as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)),
        )
      : item,
  );
}

/** The worker's answer: a schema that does not compile has a `problem`. */
interface Answer {
  /** The job's, so that an answer is never taken for another job's. */
  id?: number;
  problem?: string;
  /** The job ran out of time or could not be run: nothing is known of the schema. */
  unchecked?: string;
  /** Compiled for this job, not found compiled. */
  fresh?: boolean;
  valid?: boolean;
  error?: { instancePath: string; message?: string };
}

interface Job extends SchemaTenant {
  message: {
    id: number;
    kind: 'check' | 'validate';
    key: string;
    /** The schema as given (a structured clone keeps what JSON text would change, 1e999). */
    schema: object;
    /** The length of its canonical text, which the cache counts. */
    textSize: number;
    args?: unknown;
  };
  resolve: (answer: Answer) => void;
  /** Run once already, on a worker that died under it with others' schemas kept (see started). */
  retried?: boolean;
}

/** What validating arguments found: nothing wrong, or the first error ajv reported. */
export type ArgumentsCheck =
  | { valid: true }
  | { valid: false; instancePath: string; message: string }
  | { valid: false; schemaProblem: string }
  | { valid: false; unchecked: string };

export interface ToolSchemasOptions {
  capacity?: number;
  textCapacity?: number;
  timeoutMs?: number;
  waitingPerOrganization?: number;
  argumentsWaitingPerOrganization?: number;
  /** The worker's heap (old generation), MiB. */
  heapMb?: number;
}

/**
 * The tools' argument schemas, compiled and run in one worker thread, off the event loop: a
 * tenant's 16 KiB schema can take ajv a fifth of a second to compile (a request may carry 32),
 * and held there it held every tenant's requests. Jobs wait per organization; the next one is
 * the first of the organization whose account (every organization one user made) has taken the
 * worker least time since it last had nothing waiting (fair queuing by time, not by jobs; one
 * user's ten organizations had ten shares until 2026-12-06), the organizations of one account in
 * turn: an account sending schemas that compile in a millisecond goes before one whose take a
 * second, and waits for at most the one running.
 * Each job may take `timeoutMs`, after which the worker is ended (its cache with it) and a new
 * one takes the next job. Compiled schemas are kept in the worker by the hash of their
 * canonical text, the least recently used out first.
 */
export class ToolSchemas {
  private readonly capacity: number;
  private readonly textCapacity: number;
  private readonly timeoutMs: number;
  private readonly waitingPerOrganization: number;
  private readonly argumentsWaitingPerOrganization: number;
  private readonly heapMb: number;
  /**
   * Each organization's jobs waiting, organizations in turn: in the order their first job came,
   * one whose job was taken moved behind the others.
   */
  private readonly waiting = new Map<string, Job[]>();
  /**
   * The worker's time (ms) each account's jobs have taken since the worker last had nothing
   * waiting: the least goes next (forgetIdle drops what no longer tells them apart).
   */
  private readonly spent = new Map<string, number>();
  private worker?: Worker;
  /** Whether the worker has loaded ajv: a job's time starts when it is sent, once it has. */
  private ready = false;
  private running?: { job: Job; timer: NodeJS.Timeout; sentAt: number };
  /** A job to run again on the next worker before any other (see started). */
  private retrying?: Job;
  private jobsSent = 0;
  /** Jobs the worker running has answered: none, and a job it dies under is that job's doing. */
  private answeredByWorker = 0;
  /** Schemas compiled (not found compiled) since this started: what the specs count. */
  compiles = 0;
  /** Worker threads started since this started: what the specs count. */
  workersStarted = 0;

  constructor(options: ToolSchemasOptions = {}) {
    this.capacity = options.capacity ?? COMPILED_SCHEMAS_KEPT;
    this.textCapacity = options.textCapacity ?? COMPILED_TEXT_KEPT;
    this.timeoutMs = options.timeoutMs ?? SCHEMA_COMPILE_TIMEOUT_MS;
    this.waitingPerOrganization =
      options.waitingPerOrganization ?? SCHEMAS_WAITING_PER_ORGANIZATION;
    this.argumentsWaitingPerOrganization =
      options.argumentsWaitingPerOrganization ?? ARGUMENTS_WAITING_PER_ORGANIZATION;
    this.heapMb = options.heapMb ?? WORKER_HEAP_MB;
  }

  /**
   * Why `schema` does not compile as a draft 2020-12 schema, or undefined when it does (it is
   * then kept compiled). 429 when the organization has too many schemas waiting already.
   */
  async problemOf(tenant: SchemaTenant, schema: object): Promise<string | undefined> {
    if (this.tooManyWaiting(tenant.organizationId, 'check', this.waitingPerOrganization)) {
      throw new AppError('rate_limited', 'Too many tool schemas are being checked: retry shortly', {
        headers: { 'Retry-After': String(Math.ceil(this.timeoutMs / 1000)) },
      });
    }
    const answer = await this.run(tenant, 'check', schema);
    return answer.problem ?? answer.unchecked;
  }

  /** `args` validated against `schema`, compiled first unless it is kept. */
  async validate(tenant: SchemaTenant, schema: object, args: unknown): Promise<ArgumentsCheck> {
    if (
      this.tooManyWaiting(tenant.organizationId, 'validate', this.argumentsWaitingPerOrganization)
    ) {
      return {
        valid: false,
        unchecked: "wait behind too many of the organization's schemas to be checked",
      };
    }
    const answer = await this.run(tenant, 'validate', schema, args);
    if (answer.unchecked !== undefined) return { valid: false, unchecked: answer.unchecked };
    if (answer.problem !== undefined) return { valid: false, schemaProblem: answer.problem };
    if (answer.valid) return { valid: true };
    return {
      valid: false,
      instancePath: answer.error?.instancePath ?? '',
      message: answer.error?.message ?? 'is not valid',
    };
  }

  /** Ends the worker, failing the jobs it had; the next job starts another. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.failAll('cannot be checked: the service is stopping');
    await worker?.terminate();
  }

  /**
   * Whether the organization has `most` jobs of `kind` waiting: counted by kind, so that an end
   * user's round of calls does not refuse an admin's tool definition (429), nor the reverse.
   */
  private tooManyWaiting(
    organizationId: string,
    kind: Job['message']['kind'],
    most: number,
  ): boolean {
    const queue = this.waiting.get(organizationId) ?? [];
    let count = 0;
    for (const job of queue) if (job.message.kind === kind && ++count >= most) return true;
    return false;
  }

  private failAll(problem: string): void {
    const jobs = [...this.waiting.values()].flat();
    if (this.retrying) jobs.unshift(this.retrying);
    this.retrying = undefined;
    this.waiting.clear();
    this.spent.clear();
    if (this.running) {
      clearTimeout(this.running.timer);
      jobs.unshift(this.running.job);
      this.running = undefined;
    }
    for (const job of jobs) job.resolve({ unchecked: problem });
  }

  private run(
    tenant: SchemaTenant,
    kind: Job['message']['kind'],
    schema: object,
    args?: unknown,
  ): Promise<Answer> {
    const text = canonicalJson(schema);
    const key = createHash('sha256').update(text).digest('base64');
    const id = ++this.jobsSent;
    return new Promise<Answer>((resolve) => {
      const message = { id, kind, key, schema, textSize: text.length, args };
      const { organizationId, account } = tenant;
      let queue = this.waiting.get(organizationId);
      if (!queue) {
        // A newcomer starts level with the least served of those waiting, not below them all:
        // accounts coming and going could otherwise keep one with slow schemas waiting.
        const floor = this.leastServed()?.spent ?? 0;
        this.spent.set(account, Math.max(this.spent.get(account) ?? floor, floor));
        queue = [];
        this.waiting.set(organizationId, queue);
      }
      // A line keeps the account it began with, every job of it charged to one: should the
      // organization's account change meanwhile (OrganizationsService's cache), the new one takes
      // over once the line has emptied, with its own starting level.
      queue.push({ organizationId, account: queue[0]?.account ?? account, message, resolve });
      this.next();
    });
  }

  /** The first job of the least served account, once the worker is ready. */
  private next(): void {
    if (this.running || (this.waiting.size === 0 && !this.retrying)) return;
    let worker: Worker;
    try {
      worker = this.started();
    } catch {
      // No thread to be had (the process's resources): what waits fails, nothing hangs.
      this.failAll('cannot be checked: no worker thread could start');
      return;
    }
    if (!this.ready) return;
    const job = this.retrying ?? this.nextWaiting();
    this.retrying = undefined;
    const timer = setTimeout(
      // After the messages already come in (setImmediate runs after them): when this thread,
      // not the worker, was held up past the time, the answer waiting is taken, not thrown away.
      () =>
        setImmediate(() => {
          if (this.running?.job !== job) return;
          // Its compile cannot be interrupted: the worker goes, and the next job gets a new one.
          this.worker = undefined;
          void worker.terminate();
          this.finish(
            job,
            job.message.kind === 'check'
              ? { problem: `must compile within ${this.timeoutMs} ms` }
              : { unchecked: `took more than ${this.timeoutMs} ms to check` },
          );
        }),
      this.timeoutMs,
    );
    this.running = { job, timer, sentAt: performance.now() };
    try {
      worker.postMessage(job.message);
    } catch {
      this.finish(job, { unchecked: 'could not be sent to be checked' });
    }
  }

  /**
   * The first job of the least served organization's line, taken out of it; the line goes behind
   * the others, so that an account's organizations, as served as one another, take turns.
   */
  private nextWaiting(): Job {
    const { organizationId } = this.leastServed()!;
    const queue = this.waiting.get(organizationId)!;
    const job = queue.shift()!;
    this.waiting.delete(organizationId);
    if (queue.length > 0) this.waiting.set(organizationId, queue);
    return job;
  }

  /**
   * The organization with jobs waiting whose account's jobs have taken the least time (the
   * first in turn, on a tie), and that time; undefined when nothing waits.
   */
  private leastServed(): { organizationId: string; spent: number } | undefined {
    let least: { organizationId: string; spent: number } | undefined;
    for (const [organizationId, queue] of this.waiting) {
      const spent = this.spentBy(queue[0].account);
      if (least === undefined || spent < least.spent) least = { organizationId, spent };
    }
    return least;
  }

  /**
   * Drops what no longer tells accounts apart: everything once nothing waits, else those
   * with nothing waiting that would come back at the least served anyway.
   */
  private forgetIdle(): void {
    if (this.waiting.size === 0) {
      this.spent.clear();
      return;
    }
    const least = this.leastServed()?.spent ?? 0;
    const waitingAccounts = new Set([...this.waiting.values()].map((queue) => queue[0].account));
    for (const [account, spent] of this.spent) {
      if (!waitingAccounts.has(account) && spent <= least) this.spent.delete(account);
    }
  }

  private spentBy(account: string): number {
    return this.spent.get(account) ?? 0;
  }

  private finish(job: Job, answer: Answer): void {
    if (this.running?.job !== job) return;
    clearTimeout(this.running.timer);
    // Charged whether or not more of its own wait: one sending a job at a time (each after the
    // last was answered) would otherwise come back level with the least served each time, and
    // take every other turn (review: 32 quick schemas waited for 32 slow ones).
    this.charge(job.account, this.running.sentAt);
    this.forgetIdle();
    this.running = undefined;
    if (answer.fresh) this.compiles += 1;
    job.resolve(answer);
    this.next();
  }

  private charge(account: string, sentAt: number): void {
    this.spent.set(account, this.spentBy(account) + performance.now() - sentAt);
  }

  /**
   * The running job, to run again before any other on the next worker (not in its line: the
   * least served account would go first, and could fill the new heap again), its time so
   * far charged.
   */
  private again(job: Job): void {
    clearTimeout(this.running!.timer);
    this.charge(job.account, this.running!.sentAt);
    this.running = undefined;
    job.retried = true;
    this.retrying = job;
    this.next();
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { ajv: AJV, capacity: this.capacity, textCapacity: this.textCapacity },
      resourceLimits: { maxOldGenerationSizeMb: this.heapMb },
    });
    // Idle, it keeps no process alive; a job in flight has its timer.
    worker.unref();
    const gone = (problem: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      // One that never started would not start again: every job waiting fails, not only one.
      if (!this.ready) this.failAll('cannot be checked: the schema worker did not start');
      else if (this.running) {
        const { job } = this.running;
        // A worker that had answered other jobs held their schemas, perhaps another tenant's,
        // when its heap ran out: the job is run again, first, on a new one, where only its own
        // schema can take the heap (found by review: an innocent schema failed as too large).
        if (this.answeredByWorker > 0 && !job.retried) this.again(job);
        else this.finish(job, job.message.kind === 'check' ? { problem } : { unchecked: problem });
      }
    };
    worker.on('message', (answer: Answer & { ready?: true }) => {
      if (this.worker !== worker) return;
      if (answer.ready) {
        this.ready = true;
        this.next();
      } else {
        const running = this.running;
        if (running && running.job.message.id === answer.id) {
          this.answeredByWorker += 1;
          this.finish(running.job, answer);
        }
      }
    });
    worker.on('error', () => gone('cannot be compiled within the memory a schema may take'));
    worker.on('exit', () => gone('cannot be compiled'));
    this.worker = worker;
    this.ready = false;
    this.answeredByWorker = 0;
    this.workersStarted += 1;
    return worker;
  }
}

/** The process's one worker for tools' schemas. */
export const toolSchemas = new ToolSchemas();
