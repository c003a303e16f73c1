import { Module } from '@nestjs/common';
import { EndUsersModule } from '../end-users/end-users.module';
import { PersonalitiesModule } from '../personalities/personalities.module';
import { UsageModule } from '../usage/usage.module';
import { VocabulariesModule } from '../vocabularies/vocabularies.module';
import { LocalResponseEngine } from './engine/local-response-engine';
import { RESPONSE_ENGINE } from './engine/response-engine';
import { RespondController } from './respond.controller';
import { RespondService } from './respond.service';

@Module({
  imports: [EndUsersModule, PersonalitiesModule, UsageModule, VocabulariesModule],
  controllers: [RespondController],
  providers: [RespondService, { provide: RESPONSE_ENGINE, useClass: LocalResponseEngine }],
})
export class RespondModule {}
