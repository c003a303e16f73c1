import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  PrimaryGeneratedColumn,
  Unique,
} from 'typeorm';
import type { Scope } from '../../common/auth/caller';

@Entity('api_keys')
@Unique('api_keys_key_hash_unique', ['keyHash'])
@Check('api_keys_created_by_one', `created_by_user_id IS NULL OR created_by_api_key_id IS NULL`)
@Index('api_keys_organization_idx', ['organizationId', 'createdAt'])
// The keys a key made: the walk of a member's keys down the line (ApiKeysRepository.revokeMadeBy).
@Index('api_keys_created_by_api_key_idx', ['createdByApiKeyId'], {
  where: 'created_by_api_key_id IS NOT NULL',
})
// The keys a user made, in any organization: where a takeback walks down their lines.
@Index('api_keys_created_by_user_idx', ['createdByUserId'], {
  where: 'created_by_user_id IS NOT NULL',
})
@Check(
  'api_keys_rate_limit_check',
  `(rate_limit_rps IS NULL) = (rate_limit_burst IS NULL) AND rate_limit_rps > 0 AND rate_limit_burst >= 1`,
)
export class ApiKey {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', { onDelete: 'CASCADE', name: 'api_keys_organization_id_fkey' })
  organizationId: string;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text', array: true })
  scopes: Scope[];

  /** The first characters of the key, shown in lists so users can tell keys apart. */
  @Column({ type: 'text' })
  prefix: string;

  @Column({ name: 'last_four', type: 'text' })
  lastFour: string;

  /** SHA-256 of the full key; the key itself is never stored. */
  @Column({ name: 'key_hash', type: 'bytea' })
  keyHash: Buffer;

  /** The user whose access token created the key (null: made by a key, or not recorded). */
  @Column({ name: 'created_by_user_id', type: 'uuid', nullable: true })
  @ForeignKey('users', { onDelete: 'SET NULL', name: 'api_keys_created_by_user_id_fkey' })
  createdByUserId: string | null;

  /** The API key that created this key (null: made by a user, or before this was recorded). */
  @Column({ name: 'created_by_api_key_id', type: 'uuid', nullable: true })
  @ForeignKey('api_keys', { onDelete: 'SET NULL', name: 'api_keys_created_by_api_key_id_fkey' })
  createdByApiKeyId: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt: Date | null;

  @Column({ name: 'last_used_at', type: 'timestamptz', nullable: true })
  lastUsedAt: Date | null;

  /** The key's own bucket (with rate_limit_burst), besides its organization's; null: none. */
  @Column({ name: 'rate_limit_rps', type: 'double precision', nullable: true })
  rateLimitRps: number | null;

  @Column({ name: 'rate_limit_burst', type: 'integer', nullable: true })
  rateLimitBurst: number | null;

  /**
   * Names the key's own bucket in the bucket store: a new key's is a fresh id, a rolled key's the
   * one of the key it replaces (contract §29), so a roll refills nothing and the two keys share
   * one bucket while both work. Not shown by the API.
   */
  @Column({ name: 'rate_limit_bucket_id', type: 'uuid' })
  rateLimitBucketId: string;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt: Date | null;
}
