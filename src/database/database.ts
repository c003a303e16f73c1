import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool, PoolClient, QueryResultRow } from 'pg';
import { DataSource, type EntityManager, type EntityTarget, type ObjectLiteral } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';
import type { Sql } from './sql';

export interface StatementOptions {
  /**
   * Prepared under this name on each connection: for hot statements, whose text depends only
   * on their shape (an `sql` value's text always does).
   */
  name?: string;
  /** Runs in this transaction (from `transaction()`), else on the pool. */
  manager?: EntityManager;
}

/**
 * The one way repositories reach PostgreSQL (docs/database.md). Statements are `sql` values
 * sent straight to the pg pool under TypeORM (one round trip, no QueryRunner set-up, no entity
 * hydration); a transaction is TypeORM's, handed around as its EntityManager, and statements
 * given that manager run on its connection. Plain single-table reads and writes may use
 * TypeORM's repository API through `repository()`.
 */
@Injectable()
export class Database {
  /** The pg pool TypeORM opened: the driver exposes it, though no typed API names it. */
  readonly pool: Pool;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    this.pool = (dataSource.driver as PostgresDriver).master as Pool;
  }

  /** Every row the statement answers. */
  async rows<Row extends QueryResultRow>(
    statement: Sql,
    options: StatementOptions = {},
  ): Promise<Row[]> {
    const executor = options.manager ? await this.connectionOf(options.manager) : this.pool;
    const result = await executor.query<Row>({
      name: options.name,
      text: statement.text,
      values: statement.values as unknown[],
    });
    return result.rows;
  }

  /** The first row, or undefined. */
  async row<Row extends QueryResultRow>(
    statement: Sql,
    options: StatementOptions = {},
  ): Promise<Row | undefined> {
    return (await this.rows<Row>(statement, options))[0];
  }

  /** How many rows the statement wrote (or read). */
  async count(statement: Sql, options: StatementOptions = {}): Promise<number> {
    const executor = options.manager ? await this.connectionOf(options.manager) : this.pool;
    const result = await executor.query({
      name: options.name,
      text: statement.text,
      values: statement.values as unknown[],
    });
    return result.rowCount ?? 0;
  }

  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.dataSource.transaction(work);
  }

  /** TypeORM's repository of an entity, in the transaction when given. */
  repository<Entity extends ObjectLiteral>(
    entity: EntityTarget<Entity>,
    manager: EntityManager = this.dataSource.manager,
  ) {
    return manager.getRepository(entity);
  }

  /** A connection of the pool for the caller to release: a streamed read holds one. */
  connect(): Promise<PoolClient> {
    return this.pool.connect();
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
