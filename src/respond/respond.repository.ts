import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { poolOf, type StepBuilder, withSteps } from '../database/pg-pool';

/**
 * The one statement of /v1/respond's write. It owns no table: the memories, the month's
 * relationship and the token counts are written by steps their owners build (EndUsersService,
 * UsageService), as an audit event is written by AuditService.step. Composed into one WITH
 * statement they are one transaction in one round trip, instead of BEGIN, an INSERT per module
 * and COMMIT on a checked-out client.
 */
@Injectable()
export class RespondRepository {
  private readonly pool: Pool;

  constructor(@InjectDataSource() dataSource: DataSource) {
    this.pool = poolOf(dataSource);
  }

  /**
   * Runs the steps as one statement, prepared under `name`: the steps' text must be the same
   * each time for one name (it is: it depends only on their shape, never on their values).
   */
  async storeExchange(name: string, steps: StepBuilder[]): Promise<void> {
    const { sql, params } = withSteps(steps, 'SELECT 1');
    await this.pool.query({ name, text: sql, values: params });
  }
}
