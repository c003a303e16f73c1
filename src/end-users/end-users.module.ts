import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { UsageModule } from '../usage/usage.module';
import { EndUsersController } from './end-users.controller';
import { EndUsersService } from './end-users.service';
import { EndUser } from './entities/end-user.entity';
import { Memory } from './entities/memory.entity';
import { ErasureWorker } from './erasure.worker';

@Module({
  imports: [TypeOrmModule.forFeature([EndUser, Memory]), UsageModule],
  controllers: [EndUsersController],
  providers: [EndUsersService, ErasureWorker],
  exports: [EndUsersService],
})
export class EndUsersModule {}
