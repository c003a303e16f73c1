import { Module } from '@nestjs/common';
import { ExportsController, FormatsController } from './exports.controller';
import { ExportsService } from './exports.service';

/**
 * Read-only documents over the data plane's tables (end users, memories, personalities,
 * relationship months): each is one consistent SQL snapshot, so it reads the tables directly
 * rather than through the owning modules' services.
 */
@Module({
  controllers: [ExportsController, FormatsController],
  providers: [ExportsService],
})
export class ExportsModule {}
