import { Module } from '@nestjs/common';
import { OrganizationsModule } from '../organizations/organizations.module';
import { ToolTurnsRepository } from './tool-turns.repository';
import { ToolTurnsRetentionWorker } from './tool-turns-retention.worker';
import { ToolTurnsService } from './tool-turns.service';
import { ToolMetrics } from './tool-metrics';
import { ToolRounds } from './tool-rounds.generator';
import { WebhookToolCaller } from './webhook-tool-caller';

/** Tools of personalities (contract §26, docs/tools.md): the loop of a turn that calls them. */
@Module({
  imports: [OrganizationsModule],
  providers: [
    ToolTurnsRepository,
    ToolTurnsService,
    ToolTurnsRetentionWorker,
    WebhookToolCaller,
    ToolMetrics,
    ToolRounds,
  ],
  exports: [ToolTurnsService],
})
export class ToolsModule {}
