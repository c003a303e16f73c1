import { ApiProperty } from '@nestjs/swagger';

export class EmotionDto {
  @ApiProperty({ example: 'joy' })
  name: string;

  @ApiProperty({ example: 'A feeling of pleasure and happiness.' })
  description: string;

  @ApiProperty({ enum: ['positive', 'negative', 'ambiguous', 'neutral'] })
  valence: string;

  @ApiProperty({ minimum: 0, maximum: 1, description: 'Typical activation of the emotion' })
  arousal: number;

  @ApiProperty({ type: [String], description: 'Words and phrases that signal the emotion' })
  cues: string[];
}

export class VocabularyVersionDto {
  @ApiProperty({ example: '2.0.0' })
  version: string;

  @ApiProperty({ example: '2025-11-01T00:00:00.000Z' })
  published_at: string;

  @ApiProperty({ type: [EmotionDto] })
  emotions: EmotionDto[];
}

export class ChangelogEntryDto {
  @ApiProperty({ example: '2.0.0' })
  version: string;

  @ApiProperty({ example: '2025-11-01T00:00:00.000Z' })
  published_at: string;

  @ApiProperty()
  summary: string;

  @ApiProperty({ type: [String], description: 'Emotions new in this version' })
  added: string[];

  @ApiProperty({
    type: [String],
    description: 'Emotions of the previous version no longer present',
  })
  removed: string[];
}
