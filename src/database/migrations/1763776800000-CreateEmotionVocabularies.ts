import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateEmotionVocabularies1763776800000 implements MigrationInterface {
  name = 'CreateEmotionVocabularies1763776800000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "emotion_vocabularies" (
        "version" text PRIMARY KEY,
        "major" integer NOT NULL,
        "minor" integer NOT NULL,
        "patch" integer NOT NULL,
        "published_at" timestamptz NOT NULL,
        "summary" text NOT NULL,
        "added" jsonb NOT NULL,
        "removed" jsonb NOT NULL,
        "emotions" jsonb NOT NULL,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT "emotion_vocabularies_semver_unique" UNIQUE ("major", "minor", "patch")
      )`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "emotion_vocabularies"`);
  }
}
