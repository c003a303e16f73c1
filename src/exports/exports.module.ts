import { Module } from '@nestjs/common';
import { ExportsController, FormatsController } from './exports.controller';
import { ExportsRepository } from './exports.repository';
import { ExportsService } from './exports.service';

/**
 * Read-only documents over the data plane's tables (end users, memories, personalities,
 * relationship months): each renders rows as JSON in SQL, page by page, so it reads the tables
 * directly rather than through the owning modules' services.
 */
@Module({
  controllers: [ExportsController, FormatsController],
  providers: [ExportsService, ExportsRepository],
})
export class ExportsModule {}
