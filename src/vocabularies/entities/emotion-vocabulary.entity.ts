import { Column, CreateDateColumn, Entity, PrimaryColumn, Unique } from 'typeorm';

export interface EmotionDefinition {
  name: string;
  description: string;
  valence: 'positive' | 'negative' | 'ambiguous' | 'neutral';
  arousal: number;
  /** Words and short phrases that signal the emotion in a message. */
  cues: string[];
}

/** One published, immutable version of the emotion vocabulary. */
@Entity('emotion_vocabularies')
@Unique('emotion_vocabularies_semver_unique', ['major', 'minor', 'patch'])
export class EmotionVocabulary {
  @PrimaryColumn({ type: 'text' })
  version: string;

  @Column({ type: 'int' })
  major: number;

  @Column({ type: 'int' })
  minor: number;

  @Column({ type: 'int' })
  patch: number;

  @Column({ name: 'published_at', type: 'timestamptz' })
  publishedAt: Date;

  @Column({ type: 'text' })
  summary: string;

  @Column({ type: 'jsonb' })
  added: string[];

  @Column({ type: 'jsonb' })
  removed: string[];

  @Column({ type: 'jsonb' })
  emotions: EmotionDefinition[];

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
