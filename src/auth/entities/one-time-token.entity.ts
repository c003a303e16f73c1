import { Column, PrimaryGeneratedColumn } from 'typeorm';

/**
 * The columns of a table of single-use tokens sent by mail, each stored only as its SHA-256 and
 * spent once. Each table names its own constraints (their names are the schema's).
 */
export abstract class OneTimeToken {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'user_id', type: 'uuid' })
  userId: string;

  @Column({ name: 'token_hash', type: 'bytea' })
  tokenHash: Buffer;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  @Column({ name: 'used_at', type: 'timestamptz', nullable: true })
  usedAt: Date | null;
}
