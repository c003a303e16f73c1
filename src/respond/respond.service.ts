import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import { poolOf, withTransaction } from '../database/pg-pool';
import { EndUsersService } from '../end-users/end-users.service';
import { PersonalitiesService } from '../personalities/personalities.service';
import { UsageService } from '../usage/usage.service';
import { VocabulariesService } from '../vocabularies/vocabularies.service';
import { RespondDto, RespondResponseDto } from './dto/respond.dto';
import { RESPONSE_ENGINE, type ResponseEngine } from './engine/response-engine';

const FOREIGN_KEY_VIOLATION = '23503';

/** How many earlier messages of the conversation the engine is given. */
const RECALLED_MEMORIES = 6;

@Injectable()
export class RespondService {
  private readonly pool: Pool;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly endUsers: EndUsersService,
    private readonly personalities: PersonalitiesService,
    private readonly usage: UsageService,
    private readonly vocabularies: VocabulariesService,
    @Inject(RESPONSE_ENGINE) private readonly engine: ResponseEngine,
  ) {
    this.pool = poolOf(dataSource);
  }

  async respond(organizationId: string, dto: RespondDto): Promise<RespondResponseDto> {
    // Both reads are scoped to the organization and independent, so they share the wait. The
    // end user is created only once the personality is known to be the organization's.
    const [personality, memories] = await Promise.all([
      this.personalities.findForReply(organizationId, dto.personality_id),
      this.endUsers.recall(organizationId, dto.user_id, dto.personality_id, RECALLED_MEMORIES),
    ]);
    const { row: endUser } = await this.endUsers.ensure(organizationId, dto.user_id);
    const vocabulary = this.vocabularies.latestDefinition();
    const reply = await this.engine.reply({
      personality,
      message: dto.message,
      memories,
      vocabulary,
    });

    const at = new Date();
    const common = {
      organizationId,
      endUserId: endUser.id,
      personalityId: personality.id,
      vocabularyVersion: vocabulary.version,
      createdAt: at,
    };
    // The memories and the month's activity land together or not at all.
    await withTransaction(this.pool, async (client) => {
      await this.endUsers.appendMemories(client, [
        {
          ...common,
          role: 'user',
          content: dto.message,
          emotion: reply.detected.name,
          intensity: reply.detected.intensity,
        },
        {
          ...common,
          role: 'personality',
          content: reply.text,
          emotion: reply.emotion.name,
          intensity: reply.emotion.intensity,
        },
      ]);
      await this.usage.recordActivity(client, {
        organizationId,
        endUserId: endUser.id,
        personalityId: personality.id,
        at,
      });
    }).catch((error: unknown) => {
      throw this.vanishedMeanwhile(error) ?? error;
    });

    return {
      personality_id: personality.id,
      user_id: endUser.user_id,
      reply: { text: reply.text, emotion: reply.emotion },
      vocabulary_version: vocabulary.version,
      created_at: at.toISOString(),
    };
  }

  /**
   * The personality deleted, or the end user erased, between the reads and the writes: the
   * foreign keys refuse the writes, and the caller gets what a moment later they would have.
   */
  private vanishedMeanwhile(error: unknown): AppError | undefined {
    const { code, constraint } = error as { code?: string; constraint?: string };
    if (code !== FOREIGN_KEY_VIOLATION) return undefined;
    if (constraint === 'memories_personality_id_fkey') return AppError.notFound('Personality');
    return this.endUsers.underDeletion({ erase_after: null });
  }
}
