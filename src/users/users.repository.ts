import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import type { Row } from '../database/row';
import { raw, sql } from '../database/sql';
import type { User } from './entities/user.entity';

/** Every column of users, aliased to the entity's properties. */
const USER_COLUMNS = raw(`id, email, name, password_hash AS "passwordHash",
  token_version AS "tokenVersion", created_at AS "createdAt", updated_at AS "updatedAt"`);

/**
 * The SQL of users. Addresses are unique and looked up case-insensitively (the lower(email)
 * unique index), which TypeORM's find options cannot say: hence SQL throughout.
 */
@Injectable()
export class UsersRepository {
  constructor(private readonly database: Database) {}

  async findById(id: string): Promise<User | null> {
    const row = await this.database.row<User>(
      sql`SELECT ${USER_COLUMNS} FROM users WHERE id = ${id}`,
    );
    return row ?? null;
  }

  async findByEmail(email: string): Promise<User | null> {
    const row = await this.database.row<User>(
      sql`SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = lower(${email})`,
    );
    return row ?? null;
  }

  /** Inserts the user unless the address is taken (any case); null when it is. */
  async insertIfEmailFree(
    manager: EntityManager,
    fields: Pick<User, 'email' | 'name' | 'passwordHash'>,
  ): Promise<User | null> {
    const row = await this.database.row<User>(
      sql`INSERT INTO users (email, name, password_hash)
          VALUES (${fields.email}, ${fields.name}, ${fields.passwordHash})
          ON CONFLICT (lower(email)) DO NOTHING
          RETURNING ${USER_COLUMNS}`,
      { manager },
    );
    return row ?? null;
  }

  /** The user's token version; null when the user does not exist. */
  async tokenVersion(userId: string): Promise<number | null> {
    const row = await this.database.row<Row<User, 'tokenVersion'>>(
      sql`SELECT token_version FROM users WHERE id = ${userId}`,
    );
    return row?.token_version ?? null;
  }

  /**
   * Sets the password hash (at `at`) and raises the token version; the user's e-mail, or null
   * when gone.
   */
  async replacePassword(
    manager: EntityManager,
    userId: string,
    passwordHash: string,
    at: Date,
  ): Promise<string | null> {
    const row = await this.database.row<Pick<User, 'email'>>(
      sql`UPDATE users SET password_hash = ${passwordHash}, token_version = token_version + 1,
                           updated_at = ${at}
           WHERE id = ${userId} RETURNING email`,
      { manager },
    );
    return row?.email ?? null;
  }
}
