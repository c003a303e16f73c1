import type { Logger as Pino } from 'pino';
import type { Logger as TypeOrmLogger } from 'typeorm';

/** TypeORM's warnings, errors and migrations as JSON log lines instead of console output. */
export class TypeOrmPinoLogger implements TypeOrmLogger {
  private readonly logger: Pino;

  constructor(root: Pino) {
    this.logger = root.child({ context: 'TypeORM' });
  }

  logQuery(): void {
    // Queries are not logged: they may carry personal data.
  }

  logQueryError(error: string | Error): void {
    this.logger.error({ err: error }, 'query failed');
  }

  logQuerySlow(time: number): void {
    this.logger.warn({ duration_ms: time }, 'slow query');
  }

  logSchemaBuild(message: string): void {
    this.logger.debug(message);
  }

  logMigration(message: string): void {
    this.logger.info(message);
  }

  /** TypeORM's chatter (which entity files a glob found) is debug; its warnings stay warnings. */
  log(level: 'log' | 'info' | 'warn', message: unknown): void {
    if (level === 'warn') this.logger.warn(String(message));
    else this.logger.debug(String(message));
  }
}
