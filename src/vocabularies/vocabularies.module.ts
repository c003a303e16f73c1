import { Module } from '@nestjs/common';
import { VocabulariesController } from './vocabularies.controller';
import { VocabulariesRepository } from './vocabularies.repository';
import { VocabulariesService } from './vocabularies.service';

@Module({
  controllers: [VocabulariesController],
  providers: [VocabulariesRepository, VocabulariesService],
  exports: [VocabulariesService],
})
export class VocabulariesModule {}
