import { Module } from '@nestjs/common';
import { AuditRetentionWorker } from './audit-retention.worker';
import { AuditController } from './audit.controller';
import { AuditRepository } from './audit.repository';
import { AuditService } from './audit.service';

/** Import it and inject AuditService to record an action (see AuditService.record). */
@Module({
  controllers: [AuditController],
  providers: [AuditRepository, AuditService, AuditRetentionWorker],
  exports: [AuditService],
})
export class AuditModule {}
