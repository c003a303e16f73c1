import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * Failed password logins of one normalised address (known or not) within the rolling window, and
 * the lock they set. Schema only: LoginAttemptsRepository reads and writes the table in single
 * atomic SQL statements, and no code uses this class; it describes the table for the migrations'
 * drift check (docs/database.md).
 */
@Entity('login_attempts')
@Check('login_attempts_email_check', `"email" = lower("email")`)
@Index('login_attempts_updated_idx', ['updatedAt'])
export class LoginAttempt {
  @PrimaryColumn({ type: 'text' })
  email: string;

  @Column({ type: 'timestamptz', array: true, default: () => "'{}'" })
  failures: Date[];

  @Column({ name: 'locked_at', type: 'timestamptz', nullable: true })
  lockedAt: Date | null;

  /** Attempts refused during the current lock: tells a refused attempt from the locking one. */
  @Column({ name: 'refused_while_locked', type: 'int', default: 0 })
  refusedWhileLocked: number;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
