import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { User } from './entities/user.entity';

const USER_COLUMNS = `id, email, name, password_hash AS "passwordHash", token_version AS "tokenVersion",
  created_at AS "createdAt", updated_at AS "updatedAt"`;

/**
 * The SQL of users. Addresses are unique and looked up case-insensitively (the lower(email)
 * unique index), which TypeORM's find options cannot say: hence SQL throughout.
 */
@Injectable()
export class UsersRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async findById(id: string): Promise<User | null> {
    const rows: User[] = await this.dataSource.query(
      `SELECT ${USER_COLUMNS} FROM users WHERE id = $1`,
      [id],
    );
    return rows[0] ?? null;
  }

  async findByEmail(email: string): Promise<User | null> {
    const rows: User[] = await this.dataSource.query(
      `SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = lower($1)`,
      [email],
    );
    return rows[0] ?? null;
  }

  /** Inserts the user unless the address is taken (any case); null when it is. */
  async insertIfEmailFree(
    manager: EntityManager,
    fields: { email: string; name: string | null; passwordHash: string },
  ): Promise<User | null> {
    const rows: User[] = await manager.query(
      `INSERT INTO users (email, name, password_hash) VALUES ($1, $2, $3)
       ON CONFLICT (lower(email)) DO NOTHING
       RETURNING ${USER_COLUMNS}`,
      [fields.email, fields.name, fields.passwordHash],
    );
    return rows[0] ?? null;
  }

  /** The user's token version; null when the user does not exist. */
  async tokenVersion(userId: string): Promise<number | null> {
    const rows: Array<{ token_version: number }> = await this.dataSource.query(
      'SELECT token_version FROM users WHERE id = $1',
      [userId],
    );
    return rows[0]?.token_version ?? null;
  }

  /**
   * Sets the password hash and raises the token version; the user's e-mail, or null when gone.
   * (Wrapped in a SELECT: TypeORM answers a bare UPDATE … RETURNING as [rows, count].)
   */
  async replacePassword(
    manager: EntityManager,
    userId: string,
    passwordHash: string,
  ): Promise<string | null> {
    const rows: Array<{ email: string }> = await manager.query(
      `WITH changed AS (
         UPDATE users SET password_hash = $2, token_version = token_version + 1, updated_at = now()
          WHERE id = $1 RETURNING email)
       SELECT email FROM changed`,
      [userId, passwordHash],
    );
    return rows[0]?.email ?? null;
  }
}
