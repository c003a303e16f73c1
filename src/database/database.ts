import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Pool, type PoolClient, type QueryResult, type QueryResultRow } from 'pg';
import { DataSource, type EntityManager, type EntityTarget, type ObjectLiteral } from 'typeorm';
import type { PostgresConnectionOptions } from 'typeorm/driver/postgres/PostgresConnectionOptions';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';
import type { Sql } from './sql';
import { readTimeoutFor, sessionOptions } from './data-source-options';
import { hasSqlState, isDeadlock } from './sql-state';
import { statementName } from './statement-name';

/**
 * Runs at most, the first included, of work that can meet another's locks in the other order
 * (StatementOptions.deadlockAttempts): a reply's write and an erasure (docs/database.md).
 */
export const DEADLOCK_ATTEMPTS = 3;

/** Connections of the asynchronous-commit pool, per instance (opened on demand). */
const ASYNC_COMMIT_POOL_SIZE = 4;

/** After its pool failed to open a session, how long bounded reads go straight to the requests'. */
const BOUNDED_SESSIONS_RETRY_MS = 1_000;

const logger = new Logger('Database');

/** pg-pool's own error when no client came within connectionTimeoutMillis (it has no code). */
export function isPoolTimeout(error: unknown): boolean {
  return (error as Error | null)?.message === 'timeout exceeded when trying to connect';
}

/**
 * The session is gone, not the statement refused: a socket error, or what PostgreSQL (or a
 * pooler) says as it ends one: class 08 (connection exception), 57P01 to 57P03 (shut down,
 * crashed, not accepting connections).
 */
function isSessionLost(error: unknown): boolean {
  if (!hasSqlState(error)) return true;
  const { code } = error as { code: string };
  return code.startsWith('08') || /^57P0[1-3]$/.test(code);
}

/** Where pg keeps a session's query_timeout, read at each statement (pg's Client, untyped). */
interface ReadTimeoutSetting {
  connectionParameters: { query_timeout?: number };
}

export interface StatementOptions {
  /**
   * Prepared on each connection, under a name derived from its text (statementName): for hot
   * statements, whose text depends only on their shape (an `sql` value's text always does).
   */
  prepared?: boolean;
  /** Runs in this transaction (from `transaction()`), else on the pool. */
  manager?: EntityManager;
  /**
   * Commits without waiting for the WAL flush (`synchronous_commit = off`), on a small pool of
   * sessions set so: for a statement of its own (no `manager`) whose loss in a PostgreSQL crash,
   * in the fraction of a second after it answered, costs nothing a crash could not cost anyway
   * (the idempotency keys' bookkeeping: docs/idempotency.md, "What a crash leaves").
   */
  asyncCommit?: boolean;
  /**
   * A statement of its own (no `manager`) that PostgreSQL rolled back to end a deadlock (40P01)
   * is sent again, this many times in all at most: rolled back whole, it is safe to send again.
   * For a statement that can meet another transaction's locks in the other order (a reply's
   * exchange against an erasure: docs/database.md).
   */
  deadlockAttempts?: number;
}

function nameOf(statement: Sql, options: Pick<StatementOptions, 'prepared'>): string | undefined {
  return options.prepared ? statementName(statement.text) : undefined;
}

/** A whole number of milliseconds for SET statement_timeout (never a string from outside). */
function timeoutLiteral(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0) throw new Error(`Database: bad statement timeout ${ms}`);
  return String(ms);
}

/**
 * The one way repositories reach PostgreSQL (docs/database.md). Statements are `sql` values
 * sent straight to the pg pool under TypeORM (one round trip, no QueryRunner set-up, no entity
 * hydration); a transaction is TypeORM's, handed around as its EntityManager, and statements
 * given that manager run on its connection. Plain single-table reads and writes may use
 * TypeORM's repository API through `repository()`.
 */
@Injectable()
export class Database implements OnApplicationShutdown {
  /** The pg pool TypeORM opened: the driver exposes it, though no typed API names it. */
  readonly pool: Pool;
  private asyncCommitPool: Pool | undefined;
  /** By statement timeout: the sessions of bounded reads (rowsWithin), each set so. */
  private readonly boundedPools = new Map<number, Pool>();
  /** Whether the last bounded read fell back to the requests' pool (logged on each change). */
  private boundedSessionsFailing = false;
  /** performance.now() before which bounded reads do not ask their pool for a session. */
  private boundedSessionsRetryAt = 0;
  /** Set at shutdown: the bounded pools are ended, so reads still coming go to the requests'. */
  private closed = false;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    this.pool = (dataSource.driver as PostgresDriver).master as Pool;
  }

  async onApplicationShutdown(): Promise<void> {
    // An application closed twice (a test closing one instance, then both) ends its pools once:
    // pg refuses a second end().
    if (this.closed) return;
    this.closed = true;
    await Promise.all([
      this.asyncCommitPool?.end(),
      ...[...this.boundedPools.values()].map((pool) => pool.end()),
    ]);
  }

  /** Every row the statement answers, typed by the Columns that built it (Columns#query). */
  rows<Row extends QueryResultRow>(statement: Sql<Row>, options?: StatementOptions): Promise<Row[]>;
  /** @deprecated A row type apart from the statement's columns: build it with Columns#query. */
  rows<Row extends QueryResultRow>(statement: Sql, options?: StatementOptions): Promise<Row[]>;
  async rows<Row extends QueryResultRow>(
    statement: Sql,
    options: StatementOptions = {},
  ): Promise<Row[]> {
    return (await this.send<Row>(statement, options)).rows;
  }

  /** The first row, or undefined. */
  row<Row extends QueryResultRow>(
    statement: Sql<Row>,
    options?: StatementOptions,
  ): Promise<Row | undefined>;
  /** @deprecated A row type apart from the statement's columns: build it with Columns#query. */
  row<Row extends QueryResultRow>(
    statement: Sql,
    options?: StatementOptions,
  ): Promise<Row | undefined>;
  async row<Row extends QueryResultRow>(
    statement: Sql,
    options: StatementOptions = {},
  ): Promise<Row | undefined> {
    return (await this.send<Row>(statement, options)).rows[0];
  }

  /** How many rows the statement wrote (or read). */
  async count(statement: Sql, options: StatementOptions = {}): Promise<number> {
    return (await this.send(statement, options)).rowCount ?? 0;
  }

  private async send<Row extends QueryResultRow>(
    statement: Sql,
    options: StatementOptions,
  ): Promise<QueryResult<Row>> {
    const attempts = options.manager ? 1 : (options.deadlockAttempts ?? 1);
    const executor = await this.executorOf(options);
    for (let attempt = 1; ; attempt++) {
      try {
        return await executor.query<Row>({
          name: nameOf(statement, options),
          text: statement.text,
          values: statement.values as unknown[],
        });
      } catch (error) {
        if (!isDeadlock(error) || attempt >= attempts) throw error;
      }
    }
  }

  /**
   * Every pool this instance has open, by what it serves: the requests' (TypeORM's), and those
   * opened on first use (asynchronous commits, reads under a time budget).
   */
  openPools(): Array<{ name: 'requests' | 'async_commit' | 'bounded_reads'; pool: Pool }> {
    return [
      { name: 'requests' as const, pool: this.pool },
      ...(this.asyncCommitPool
        ? [{ name: 'async_commit' as const, pool: this.asyncCommitPool }]
        : []),
      ...[...this.boundedPools.values()].map((pool) => ({ name: 'bounded_reads' as const, pool })),
    ];
  }

  /** Resolves when the pool answers a trivial statement (readiness). */
  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  /**
   * Runs `work` in one transaction: committed when it resolves, rolled back when it throws.
   * `statementTimeoutMs` replaces DATABASE_STATEMENT_TIMEOUT_MS for its statements (0: none), for
   * background work that is no request's (erasure of an end user holding much).
   * `deadlockAttempts` runs it that many times at most when PostgreSQL rolls it back to end a
   * deadlock (40P01), for work that can meet another's locks in the other order.
   */
  async transaction<T>(
    work: (manager: EntityManager) => Promise<T>,
    options: { statementTimeoutMs?: number; deadlockAttempts?: number } = {},
  ): Promise<T> {
    const attempts = options.deadlockAttempts ?? 1;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transactionOnce(work, options.statementTimeoutMs);
      } catch (error) {
        // Rolled back whole by PostgreSQL to end a cycle of waits: safe to run again.
        if (!isDeadlock(error) || attempt >= attempts) throw error;
      }
    }
  }

  private transactionOnce<T>(
    work: (manager: EntityManager) => Promise<T>,
    statementTimeoutMs: number | undefined,
  ): Promise<T> {
    if (statementTimeoutMs === undefined) return this.dataSource.transaction(work);
    return this.dataSource.transaction(async (manager) => {
      await manager.query(`SET LOCAL statement_timeout = ${timeoutLiteral(statementTimeoutMs)}`);
      // The client's wait for an answer follows the budget: longer for a manual attempt, none
      // for an erasure (DatabaseClient; readTimeoutFor).
      const session = (await this.connectionOf(manager)) as PoolClient & ReadTimeoutSetting;
      const readTimeout = session.connectionParameters.query_timeout;
      if (readTimeout) {
        session.connectionParameters.query_timeout = readTimeoutFor(statementTimeoutMs);
      }
      try {
        return await work(manager);
      } finally {
        session.connectionParameters.query_timeout = readTimeout;
      }
    });
  }

  /**
   * Every row of a read that may take at most `timeoutMs` of the database's time, on a session
   * set so (boundedSessions); past it PostgreSQL cancels the statement and this rejects with
   * SQLSTATE 57014 (isStatementTimeout). For work a request can go on without.
   */
  rowsWithin<Row extends QueryResultRow>(
    statement: Sql<Row>,
    timeoutMs: number,
    options?: Pick<StatementOptions, 'prepared'>,
  ): Promise<Row[]>;
  /** @deprecated A row type apart from the statement's columns: build it with Columns#query. */
  rowsWithin<Row extends QueryResultRow>(
    statement: Sql,
    timeoutMs: number,
    options?: Pick<StatementOptions, 'prepared'>,
  ): Promise<Row[]>;
  async rowsWithin<Row extends QueryResultRow>(
    statement: Sql,
    timeoutMs: number,
    options: Pick<StatementOptions, 'prepared'> = {},
  ): Promise<Row[]> {
    const query = {
      name: nameOf(statement, options),
      text: statement.text,
      values: statement.values as unknown[],
    };
    // No session of its own to be had (the server's max_connections reached by these extra
    // sessions, most likely, while the requests' pool still holds its own): the read still runs,
    // on the requests' pool as a transaction with the budget set locally, three round trips. For a
    // second after, no new session is asked for: a refused one costs the server a process.
    if (this.closed || performance.now() < this.boundedSessionsRetryAt) {
      return this.rowsInTransactionWithin<Row>(statement, timeoutMs, options);
    }
    let client: PoolClient;
    try {
      client = await this.boundedSessions(timeoutMs).connect();
    } catch (error) {
      // Its own sessions all busy past connectionTimeoutMillis: the database is slow, and moving
      // these reads onto the requests' pool would only crowd it. The error is the caller's.
      if (isPoolTimeout(error)) throw error;
      this.boundedSessionsRetryAt = performance.now() + BOUNDED_SESSIONS_RETRY_MS;
      this.boundedReadsFailing(error);
      return this.rowsInTransactionWithin<Row>(statement, timeoutMs, options);
    }
    let lost: Error | undefined;
    try {
      const result = await client.query<Row>(query);
      this.boundedReadsFailing(undefined);
      return result.rows;
    } catch (error) {
      // A statement PostgreSQL refused (cancelled past its budget, most often) leaves a sound
      // session, kept with its prepared statements: closing it would make the next read open a
      // cold one just when the database is slow, and the refusal is the caller's to handle.
      if (!isSessionLost(error)) throw error;
      // A session lost on the way (ended by the server or a pooler, or because its budget could
      // not be set) is dropped, and the read, which changes nothing, runs once more on the
      // requests' pool.
      lost = error as Error;
      this.boundedReadsFailing(error);
    } finally {
      client.release(lost);
    }
    return this.rowsInTransactionWithin<Row>(statement, timeoutMs, options);
  }

  private rowsInTransactionWithin<Row extends QueryResultRow>(
    statement: Sql,
    timeoutMs: number,
    options: Pick<StatementOptions, 'prepared'>,
  ): Promise<Row[]> {
    return this.transaction(
      async (manager) => (await this.send<Row>(statement, { ...options, manager })).rows,
      { statementTimeoutMs: timeoutMs },
    );
  }

  /** Logs when the bounded reads' sessions start failing (once) and when they serve again. */
  private boundedReadsFailing(error: unknown): void {
    const failing = error !== undefined;
    if (failing === this.boundedSessionsFailing) return;
    this.boundedSessionsFailing = failing;
    if (failing) {
      const { code, message } = error as { code?: string; message?: string };
      logger.warn(
        `bounded reads: no session of their own (${code ?? 'no SQLSTATE'}: ${message}); ` +
          'running them on the requests’ pool, three round trips each, until one opens',
      );
    } else {
      logger.log('bounded reads: sessions of their own again');
    }
  }

  /** TypeORM's repository of an entity, in the transaction when given. */
  repository<Entity extends ObjectLiteral>(
    entity: EntityTarget<Entity>,
    manager: EntityManager = this.dataSource.manager,
  ) {
    return manager.getRepository(entity);
  }

  private async executorOf(options: StatementOptions): Promise<Pool | PoolClient> {
    if (options.manager) {
      if (options.asyncCommit) {
        throw new Error('Database: a statement in a transaction commits with the transaction');
      }
      return this.connectionOf(options.manager);
    }
    return options.asyncCommit ? this.asyncCommitSessions() : this.pool;
  }

  /** Opened on first use: an instance that never needs it holds no connection for it. */
  private asyncCommitSessions(): Pool {
    if (!this.asyncCommitPool) {
      const options = this.dataSource.options as PostgresConnectionOptions;
      this.asyncCommitPool = new Pool({
        ...(options.extra as Record<string, unknown>),
        connectionString: options.url,
        max: ASYNC_COMMIT_POOL_SIZE,
        application_name: 'personality-api async-commit',
        options: sessionOptions('-c synchronous_commit=off'),
      });
      // An idle connection that fails is replaced on the next checkout; without a listener its
      // error would end the process.
      this.asyncCommitPool.on('error', () => undefined);
    }
    return this.asyncCommitPool;
  }

  /**
   * The pool whose sessions have `timeoutMs` as their statement_timeout, opened on first use, for
   * the reads every reply makes beside its others (recall, knowledge; all with
   * MEMORY_RECALL_TIMEOUT_MS today, so one pool): one round trip each, where a transaction
   * setting the budget took three. Half the main pool's connections at most. The budget is SET in
   * each new session before its first read, not sent as a start-up parameter, which DATABASE_URL's
   * own `options` or `statement_timeout` (or a pooler dropping start-up options) would override.
   */
  private boundedSessions(timeoutMs: number): Pool {
    let pool = this.boundedPools.get(timeoutMs);
    if (!pool) {
      const options = this.dataSource.options as PostgresConnectionOptions;
      const extra = options.extra as { max?: number } & Record<string, unknown>;
      const budget = `SET statement_timeout = ${timeoutLiteral(timeoutMs)}`;
      pool = new Pool({
        ...extra,
        connectionString: options.url,
        max: Math.ceil((extra.max ?? 10) / 2),
        application_name: 'personality-api bounded-reads',
      });
      // Queued on the new client ahead of the read that checked it out, so it runs first. A
      // session it fails on is ended: the read queued behind fails too (and runs again on the
      // requests' pool, budget set there), never unbounded.
      pool.on('connect', (client) => {
        client.query(budget).catch(() => void client.end().catch(() => undefined));
      });
      pool.on('error', () => undefined);
      this.boundedPools.set(timeoutMs, pool);
    }
    return pool;
  }

  /** The pg client a transaction's QueryRunner holds. */
  private async connectionOf(manager: EntityManager): Promise<PoolClient> {
    const runner = manager.queryRunner;
    if (!runner || !runner.isTransactionActive) {
      throw new Error('Database: a manager given to a statement must be a transaction’s');
    }
    return (await runner.connect()) as PoolClient;
  }
}
