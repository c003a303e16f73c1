import {
  Column,
  CreateDateColumn,
  Entity,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';

@Entity('users')
export class User {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ type: 'text' })
  email: string;

  @Column({ type: 'text', nullable: true })
  name: string | null;

  @Column({ name: 'password_hash', type: 'text' })
  passwordHash: string;

  /**
   * When the user proved the address theirs (the link mailed at sign-up); null until then.
   * Inviting needs it. Users from before verification existed count as verified (their
   * sign-up time), see docs/identity.md.
   */
  @Column({ name: 'email_verified_at', type: 'timestamptz', nullable: true })
  emailVerifiedAt: Date | null;

  /** Organizations the user has created, sign-up's included: capped by ORGANIZATIONS_PER_USER. */
  @Column({ name: 'organizations_created', type: 'int', default: 0 })
  organizationsCreated: number;

  /** Raised by a password reset: access tokens carrying an older version are refused. */
  @Column({ name: 'token_version', type: 'int', default: 0 })
  tokenVersion: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
