import { Module } from '@nestjs/common';
import { EndUsersModule } from '../end-users/end-users.module';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { OrganizationsModule } from '../organizations/organizations.module';
import { PersonalitiesModule } from '../personalities/personalities.module';
import { SafetyModule } from '../safety/safety.module';
import { VocabulariesModule } from '../vocabularies/vocabularies.module';
import { ExportsController, FormatsController } from './exports.controller';
import { ExportsRepository } from './exports.repository';
import { ExportsService } from './exports.service';
import { ImportController } from './import.controller';
import { ImportRepository } from './import.repository';
import { ImportSlotInterceptor, ImportSlots } from './import-slots';
import { ImportService } from './import.service';

/**
 * Data portability, above end users and personalities: the export and subject-access documents
 * render rows as JSON in SQL, page by page, so they read the data plane's tables directly; the
 * import writes through what the owning modules lend (end users', memories' and facts' steps,
 * PersonalitiesService.provideForImport) in one transaction, each memory classified by the
 * safety module's local classifier.
 */
@Module({
  imports: [
    EndUsersModule,
    PersonalitiesModule,
    VocabulariesModule,
    IdempotencyModule,
    SafetyModule,
    OrganizationsModule,
  ],
  controllers: [ExportsController, FormatsController, ImportController],
  providers: [
    ExportsService,
    ExportsRepository,
    ImportService,
    ImportRepository,
    ImportSlots,
    ImportSlotInterceptor,
  ],
})
export class ExportsModule {}
