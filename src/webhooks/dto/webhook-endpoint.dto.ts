import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsIn,
  IsString,
  MaxLength,
  MinLength,
  registerDecorator,
  ValidateIf,
  type ValidationOptions,
} from 'class-validator';
import { NoControlCharacters } from '../../common/validation/no-control-characters';
import type {
  WebhookEndpointDisabledReason,
  WebhookEndpointStatus,
} from '../entities/webhook-endpoint.entity';
import { urlFormProblem } from '../ssrf-guard';
import { WEBHOOK_EVENT_TYPES } from '../webhook-event-types';
import { URL_MAX_LENGTH } from '../webhook-url';
import type { WebhookEndpointRow } from '../webhooks.repository';

const ENDPOINT_STATUSES = ['enabled', 'disabled'] as const;

/** An absolute http(s) URL without credentials (its address is checked by the service). */
function IsWebhookUrl(options?: ValidationOptions) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'isWebhookUrl',
      target: object.constructor,
      propertyName,
      options,
      validator: {
        validate: (value: unknown) => typeof value === 'string' && !urlFormProblem(value),
        defaultMessage: (args) =>
          `${args?.property ?? 'url'} ${
            typeof args?.value === 'string' ? urlFormProblem(args.value) : 'must be a string'
          }`,
      },
    });
}

const IfGiven = () => ValidateIf((_dto: object, value: unknown) => value !== undefined);
const IfNotNull = () =>
  ValidateIf((_dto: object, value: unknown) => value !== undefined && value !== null);

export class CreateWebhookEndpointDto {
  @ApiProperty({ example: 'https://example.com/webhooks/personality', maxLength: 2048 })
  @IsString()
  @MaxLength(URL_MAX_LENGTH)
  @IsWebhookUrl()
  url: string;

  @ApiProperty({ enum: WEBHOOK_EVENT_TYPES, isArray: true, example: ['end_user.deleted'] })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(WEBHOOK_EVENT_TYPES.length)
  @ArrayUnique()
  @IsIn(WEBHOOK_EVENT_TYPES, { each: true })
  events: string[];

  @ApiPropertyOptional({ nullable: true, type: String, maxLength: 500 })
  @IfNotNull()
  @IsString()
  @MinLength(1)
  @MaxLength(500)
  @NoControlCharacters()
  description?: string | null;
}

export class UpdateWebhookEndpointDto {
  @ApiPropertyOptional({ maxLength: 2048 })
  @IfGiven()
  @IsString()
  @MaxLength(URL_MAX_LENGTH)
  @IsWebhookUrl()
  url?: string;

  @ApiPropertyOptional({ enum: WEBHOOK_EVENT_TYPES, isArray: true })
  @IfGiven()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(WEBHOOK_EVENT_TYPES.length)
  @ArrayUnique()
  @IsIn(WEBHOOK_EVENT_TYPES, { each: true })
  events?: string[];

  /** null clears it. */
  @ApiPropertyOptional({ nullable: true, type: String, maxLength: 500 })
  @IfNotNull()
  @IsString()
  @MinLength(1)
  @MaxLength(500)
  @NoControlCharacters()
  description?: string | null;

  @ApiPropertyOptional({ enum: ENDPOINT_STATUSES })
  @IfGiven()
  @IsIn(ENDPOINT_STATUSES)
  status?: WebhookEndpointStatus;
}

export class WebhookEndpointDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty()
  url: string;

  @ApiProperty({ enum: WEBHOOK_EVENT_TYPES, isArray: true })
  events: string[];

  @ApiProperty({ nullable: true, type: String })
  description: string | null;

  @ApiProperty({ enum: ENDPOINT_STATUSES })
  status: WebhookEndpointStatus;

  @ApiProperty({
    // null among the values too: a validator of OpenAPI 3.0 checks enum before nullable.
    enum: ['failing', null],
    nullable: true,
    type: String,
    description:
      '`failing`: the service disabled the endpoint because every attempt failed for WEBHOOK_DISABLE_AFTER_HOURS (its owners and admins were e-mailed); null otherwise. Enabling it again clears it',
  })
  disabled_reason: WebhookEndpointDisabledReason | null;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;
}

export class CreatedWebhookEndpointDto extends WebhookEndpointDto {
  @ApiProperty({
    example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    nullable: true,
    type: String,
    description:
      'The signing secret (Standard Webhooks). It is shown in this response only and cannot be retrieved again: `null` in the replay of an Idempotency-Key',
  })
  secret: string;
}

export class WebhookPingDto {
  @ApiProperty({ example: 'evt_2f1c0d7e9a8b4c3d8e7f6a5b4c3d2e1f' })
  event_id: string;
}

export function toWebhookEndpointResponse(row: WebhookEndpointRow): WebhookEndpointDto {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    description: row.description,
    status: row.status,
    disabled_reason: row.disabled_reason,
    created_at: row.created_at.toISOString(),
  };
}
