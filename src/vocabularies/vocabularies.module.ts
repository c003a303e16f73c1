import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EmotionVocabulary } from './entities/emotion-vocabulary.entity';
import { VocabulariesController } from './vocabularies.controller';
import { VocabulariesRepository } from './vocabularies.repository';
import { VocabulariesService } from './vocabularies.service';

@Module({
  imports: [TypeOrmModule.forFeature([EmotionVocabulary])],
  controllers: [VocabulariesController],
  providers: [VocabulariesRepository, VocabulariesService],
  exports: [VocabulariesService],
})
export class VocabulariesModule {}
