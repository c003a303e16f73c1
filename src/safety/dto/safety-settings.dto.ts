import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsString, Matches, MaxLength, ValidateIf } from 'class-validator';
import { HasVisibleText } from '../../common/validation/visible-text';
import { MODERATION_MODES, type ModerationMode } from '../entities/safety-settings.entity';

export const CRISIS_MESSAGE_MAX_CHARACTERS = 1000;

/** Control characters but the line feed: a crisis message may have lines. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_BUT_NEWLINE = /^[^\u0000-\u0009\u000b-\u001f\u007f-\u009f]*$/;

/**
 * Bidirectional controls (the Arabic letter mark, LRM and RLM, embeddings, overrides and
 * isolates) reorder the text around them: a crisis message must read as it is written.
 */
const NO_BIDI_CONTROL = /^[^\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]*$/u;

export class SafetySettingsDto {
  @ApiProperty({
    enum: ['on', 'off'],
    description:
      'on: a message expressing suicidal ideation or self-harm gets a careful reply that ends with crisis_message',
  })
  crisis_response: 'on' | 'off';

  @ApiProperty({
    minLength: 1,
    maxLength: CRISIS_MESSAGE_MAX_CHARACTERS,
    description: 'Appended to a crisis reply; the default names emergency numbers and crisis lines',
  })
  crisis_message: string;

  @ApiProperty({
    enum: MODERATION_MODES,
    description:
      'Messages in sexual_minors or violence: off, flag (recorded, nothing changes) or block (not sent to the engine; a short refusal answers)',
  })
  input_moderation: ModerationMode;

  @ApiProperty({
    enum: MODERATION_MODES,
    description:
      'Replies in sexual_minors or violence: off, flag, or block (replaced by a refusal; streamed replies are released sentence by sentence after a check)',
  })
  output_moderation: ModerationMode;
}

/** A PATCH: the fields given change; `crisis_message: null` restores the default message. */
export class UpdateSafetySettingsDto {
  @ApiPropertyOptional({ enum: ['on', 'off'] })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined)
  @IsIn(['on', 'off'])
  crisis_response?: 'on' | 'off';

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    minLength: 1,
    maxLength: CRISIS_MESSAGE_MAX_CHARACTERS,
    description:
      'null restores the default message. Lines may be separated by \\n; no other control character',
  })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined && value !== null)
  @IsString()
  @Matches(/^[\s\S]{1,1000}$/u, { message: 'crisis_message must be 1..1000 characters' })
  @HasVisibleText({ message: 'crisis_message must hold a visible character' })
  @Matches(NO_BIDI_CONTROL, {
    message: 'crisis_message must not contain bidirectional control characters',
  })
  @Matches(CONTROL_BUT_NEWLINE, {
    message: 'crisis_message must not contain control characters other than line feeds',
  })
  @MaxLength(CRISIS_MESSAGE_MAX_CHARACTERS * 2)
  crisis_message?: string | null;

  @ApiPropertyOptional({ enum: MODERATION_MODES })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined)
  @IsIn(MODERATION_MODES)
  input_moderation?: ModerationMode;

  @ApiPropertyOptional({ enum: MODERATION_MODES })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined)
  @IsIn(MODERATION_MODES)
  output_moderation?: ModerationMode;
}
