import {
  Global,
  Inject,
  Injectable,
  Module,
  type DynamicModule,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { PeriodicPurge, type PeriodicPurgeOptions } from './periodic-purge';
import { PeriodicTask, type PeriodicTaskOptions } from './periodic-task';

/**
 * What this process is: the server runs the background jobs and serves metrics; a command of
 * `node dist/cli.js` does its one thing on the same modules and exits, touching neither.
 */
export type ProcessRole = 'server' | 'command';
export const PROCESS_ROLE = Symbol('PROCESS_ROLE');

/** Work that runs beside requests from application start until shutdown. */
export interface BackgroundJob {
  start(): void;
  /** Ends the work in progress: called before the database closes. */
  stop(): Promise<void>;
}

/**
 * The one place background jobs (erasure, purges, webhook delivery) are started and stopped:
 * workers register theirs when they are built; the server starts them all once the application
 * is up, a command never does, and shutdown stops them before TypeORM closes the pool.
 */
@Injectable()
export class BackgroundJobs implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly jobs: BackgroundJob[] = [];

  constructor(@Inject(PROCESS_ROLE) private readonly role: ProcessRole) {}

  add(job: BackgroundJob): void {
    this.jobs.push(job);
  }

  /** A PeriodicTask of this process, registered. */
  periodic(options: PeriodicTaskOptions): PeriodicTask {
    const task = new PeriodicTask(options);
    this.add(task);
    return task;
  }

  /** A retention purge of this process, registered. */
  purge(options: PeriodicPurgeOptions): PeriodicPurge {
    return new PeriodicPurge(this, options);
  }

  onApplicationBootstrap(): void {
    if (this.role !== 'server') return;
    for (const job of this.jobs) job.start();
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.jobs.map((job) => job.stop()));
  }
}

@Global()
@Module({})
export class BackgroundJobsModule {
  static forRole(role: ProcessRole): DynamicModule {
    return {
      module: BackgroundJobsModule,
      providers: [{ provide: PROCESS_ROLE, useValue: role }, BackgroundJobs],
      exports: [PROCESS_ROLE, BackgroundJobs],
    };
  }
}
