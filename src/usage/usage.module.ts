import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { RelationshipMonth } from './entities/relationship-month.entity';
import { UsageMonthlyCounter } from './entities/usage-monthly-counter.entity';
import { UsageController } from './usage.controller';
import { UsageRepository } from './usage.repository';
import { UsageService } from './usage.service';
import { ReplyUsage } from './reply-usage.participant';

@Module({
  imports: [TypeOrmModule.forFeature([RelationshipMonth, UsageMonthlyCounter])],
  controllers: [UsageController],
  providers: [UsageRepository, UsageService, ReplyUsage],
  exports: [UsageService],
})
export class UsageModule {}
