import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { RelationshipMonth } from './entities/relationship-month.entity';
import { UsageMonthlyCounter } from './entities/usage-monthly-counter.entity';
import { UsageController } from './usage.controller';
import { UsageRepository } from './usage.repository';
import { UsageService } from './usage.service';

@Module({
  imports: [TypeOrmModule.forFeature([RelationshipMonth, UsageMonthlyCounter])],
  controllers: [UsageController],
  providers: [UsageRepository, UsageService],
  exports: [UsageService],
})
export class UsageModule {}
