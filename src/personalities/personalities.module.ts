import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { CatalogPersonality } from './entities/catalog-personality.entity';
import { Personality } from './entities/personality.entity';
import { PersonalitiesController } from './personalities.controller';
import { PersonalitiesService } from './personalities.service';

@Module({
  imports: [TypeOrmModule.forFeature([CatalogPersonality, Personality])],
  controllers: [PersonalitiesController],
  providers: [PersonalitiesService],
  exports: [PersonalitiesService],
})
export class PersonalitiesModule {}
