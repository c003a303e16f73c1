import { ApiProperty } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsIn,
  IsString,
  MaxLength,
  MinLength,
} from 'class-validator';

/**
 * The fields a catalog entry, its clones and a PATCH share. VoiceDto and RepliesDto validate when
 * they arrive in a request and describe the same fields in responses.
 */
export class VoiceDto {
  @ApiProperty({ example: 'warm and unhurried' })
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  tone: string;

  @ApiProperty({ enum: ['casual', 'neutral', 'formal'] })
  @IsIn(['casual', 'neutral', 'formal'])
  formality: 'casual' | 'neutral' | 'formal';

  @ApiProperty({ example: 'Short paragraphs, one question at the end.' })
  @IsString()
  @MaxLength(1000)
  style_notes: string;
}

const templates = () => [
  IsArray(),
  ArrayMinSize(1),
  ArrayMaxSize(20),
  IsString({ each: true }),
  MinLength(1, { each: true }),
  MaxLength(4000, { each: true }),
];

function Templates(): PropertyDecorator {
  return (target, key) => templates().forEach((decorate) => decorate(target, key));
}

/** Reply templates of the default engine, by valence; `{emotion}` and `{memory}` are filled in. */
export class RepliesDto {
  @ApiProperty()
  @IsString()
  @MinLength(1)
  @MaxLength(4000)
  first_meeting: string;

  @ApiProperty({ type: [String] })
  @Templates()
  positive: string[];

  @ApiProperty({ type: [String] })
  @Templates()
  negative: string[];

  @ApiProperty({ type: [String] })
  @Templates()
  ambiguous: string[];

  @ApiProperty({ type: [String] })
  @Templates()
  neutral: string[];

  @ApiProperty({ type: [String], description: 'Used when the personality recalls a memory' })
  @Templates()
  recall: string[];
}

/** What a catalog entry and its clones have in common: the personality itself. */
export class PersonalityContentDto {
  @ApiProperty({ example: 'Sage' })
  name: string;

  @ApiProperty()
  description: string;

  @ApiProperty({ type: [String] })
  traits: string[];

  @ApiProperty({ type: VoiceDto })
  voice: VoiceDto;

  @ApiProperty()
  system_prompt: string;

  @ApiProperty({ type: RepliesDto })
  replies: RepliesDto;
}
