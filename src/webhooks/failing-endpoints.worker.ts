import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import type { PeriodicTask } from '../common/time/periodic-task';
import { webhooksConfig } from '../config/webhooks.config';
import { type DisabledEndpointRow, WebhooksRepository } from './webhooks.repository';

/** How often every instance looks for endpoints to disable: the rule counts in hours. */
const CHECK_INTERVAL_MS = 10 * 60_000;

/** An endpoint the service disabled for failing (contract §25). */
export interface DisabledEndpoint {
  id: string;
  organizationId: string;
  url: string;
  failingSince: Date;
}

/** Told about the endpoints a run disabled, once each, after the change committed. */
export type DisabledEndpointsListener = (endpoints: DisabledEndpoint[]) => Promise<void>;

/**
 * Disables an endpoint whose attempts have all failed for WEBHOOK_DISABLE_AFTER_HOURS (its
 * `failing_since`, kept by the recording of outcomes, that far back): status `disabled`,
 * `disabled_reason: "failing"`, its pending attempts ended, as a disabling by the organization
 * would. Every instance runs it; one statement decides, so each endpoint is disabled, and its
 * organization told, by one instance once. Who is told is not this module's business: a module
 * above it (organizations, which mails the owners and admins) registers a listener.
 */
@Injectable()
export class FailingEndpointsWorker {
  private readonly listeners: DisabledEndpointsListener[] = [];
  private readonly task: PeriodicTask;

  constructor(
    private readonly webhooks: WebhooksRepository,
    @Inject(webhooksConfig.KEY) private readonly config: ConfigType<typeof webhooksConfig>,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(FailingEndpointsWorker.name);
    this.task = jobs.periodic({
      intervalMs: CHECK_INTERVAL_MS,
      firstDelayMs: 60_000,
      run: async () => {
        await this.disableFailing();
      },
      onError: (error) => this.logger.error({ err: error }, 'disabling failing endpoints failed'),
    });
  }

  onDisabled(listener: DisabledEndpointsListener): void {
    this.listeners.push(listener);
  }

  /** Disables the endpoints failing for long enough now; answers them (also for specs). */
  disableDue(): Promise<DisabledEndpoint[]> {
    return this.task.exclusive(() => this.disableFailing());
  }

  private async disableFailing(): Promise<DisabledEndpoint[]> {
    const now = this.clock.now();
    const cutoff = new Date(now.getTime() - this.config.disableAfterHours * 3_600_000);
    const rows = await this.webhooks.disableFailing(cutoff, now);
    const disabled = rows.map(toDisabledEndpoint);
    for (const endpoint of disabled) {
      this.logger.warn(
        {
          webhookEndpointId: endpoint.id,
          organizationId: endpoint.organizationId,
          failingSince: endpoint.failingSince.toISOString(),
        },
        'webhook endpoint disabled: every attempt failed for WEBHOOK_DISABLE_AFTER_HOURS',
      );
    }
    if (disabled.length === 0) return disabled;
    for (const listener of this.listeners) {
      await listener(disabled).catch((error: unknown) =>
        this.logger.error({ err: error }, 'telling of disabled webhook endpoints failed'),
      );
    }
    return disabled;
  }
}

function toDisabledEndpoint(row: DisabledEndpointRow): DisabledEndpoint {
  return {
    id: row.id,
    organizationId: row.organization_id,
    url: row.url,
    failingSince: row.failing_since!,
  };
}
