import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditRetentionWorker } from './audit-retention.worker';
import { AuditController } from './audit.controller';
import { AuditRepository } from './audit.repository';
import { AuditService } from './audit.service';
import { AuditEvent } from './entities/audit-event.entity';

/** Import it and inject AuditService to record an action (see AuditService.record). */
@Module({
  imports: [TypeOrmModule.forFeature([AuditEvent])],
  controllers: [AuditController],
  providers: [AuditRepository, AuditService, AuditRetentionWorker],
  exports: [AuditService],
})
export class AuditModule {}
