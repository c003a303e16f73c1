import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/**
 * The keys made (created or rolled) in a UTC day in one member's lines of an organization
 * (API_KEYS_PER_DAY): by the member's access token, or by keys of lines the member began
 * (`through_key`), each counted apart. Removing or demoting a member, and a password reset that
 * takes an address back, revoke every key down the member's lines in one statement, so how many
 * keys those lines hold bounds how long that takes. Only the current day's row and the day
 * before's are kept.
 */
@Entity('api_key_daily_creations')
export class ApiKeyDailyCreation {
  @PrimaryColumn({
    name: 'organization_id',
    type: 'uuid',
    primaryKeyConstraintName: 'api_key_daily_creations_pkey',
  })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'api_key_daily_creations_organization_id_fkey',
  })
  organizationId: string;

  /** The member whose lines the keys are in; the nil UUID for lines no member began. */
  @PrimaryColumn({
    name: 'maker_id',
    type: 'uuid',
    primaryKeyConstraintName: 'api_key_daily_creations_pkey',
  })
  makerId: string;

  /** Made by a key of the member's lines, not by the member's access token. */
  @PrimaryColumn({
    name: 'through_key',
    type: 'boolean',
    primaryKeyConstraintName: 'api_key_daily_creations_pkey',
  })
  throughKey: boolean;

  /** The UTC day. */
  @PrimaryColumn({ type: 'date', primaryKeyConstraintName: 'api_key_daily_creations_pkey' })
  day: string;

  @Column({ type: 'integer' })
  keys: number;
}
