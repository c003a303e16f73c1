import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional } from 'class-validator';
import { IdListQueryDto } from '../../common/pagination/pagination';
import { AUDIT_ACTIONS } from '../audit-actions';
import type { AuditEventRow } from '../audit.repository';

export class AuditEventQueryDto extends IdListQueryDto {
  /** Only events of this action. */
  @ApiPropertyOptional({ enum: AUDIT_ACTIONS })
  @IsOptional()
  @IsIn(AUDIT_ACTIONS)
  action?: string;
}

export class AuditActorDto {
  @ApiProperty({ enum: ['user', 'api_key'] })
  type: string;

  @ApiProperty({ description: 'The user id or the API key id' })
  id: string;
}

export class AuditTargetDto {
  @ApiProperty({
    example: 'api_key',
    description: 'api_key, user, invitation, subscription, end_user, personality, …',
  })
  type: string;

  @ApiProperty({ description: "The target's id (for an end user: its user_id)" })
  id: string;
}

export class AuditEventDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ enum: AUDIT_ACTIONS })
  action: string;

  @ApiProperty({ type: AuditActorDto })
  actor: AuditActorDto;

  @ApiProperty({ type: AuditTargetDto })
  target: AuditTargetDto;

  @ApiProperty({
    nullable: true,
    type: String,
    description: 'The client address (TRUST_PROXY decides whether X-Forwarded-For is believed)',
  })
  ip: string | null;

  @ApiProperty({
    nullable: true,
    type: String,
    description: 'The X-Request-Id of the request that made the change',
  })
  request_id: string | null;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'Facts about the change (never a secret)',
  })
  details: Record<string, unknown>;
}

export function toAuditEventResponse(row: AuditEventRow): AuditEventDto {
  return {
    id: row.id,
    action: row.action,
    actor: { type: row.actor_type, id: row.actor_id },
    target: { type: row.target_type, id: row.target_id },
    ip: row.ip,
    request_id: row.request_id,
    created_at: row.created_at.toISOString(),
    details: row.details,
  };
}
