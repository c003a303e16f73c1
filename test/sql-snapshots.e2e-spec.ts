import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Database } from '../src/database/database';
import {
  knowledgeStatements,
  QUERIES_DIR,
  renderQueries,
  replyStatements,
} from '../src/queries/statements';
import { createTestApp, type TestApp } from './support/test-app';

describe('checked-in statements (src/queries)', () => {
  it.each([...renderQueries()])('%s is the statement the service sends', (file, content) => {
    const checkedIn = readFileSync(join(QUERIES_DIR, file), 'utf8');
    if (checkedIn !== content) {
      throw new Error(
        `src/queries/${file} differs from the statements sent: run npm run sql:generate`,
      );
    }
  });

  describe('on the migrated schema', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await createTestApp();
    });

    afterAll(async () => {
      await t.close();
    });

    // PostgreSQL parses and plans each one, so a snapshot is of a statement it accepts.
    it.each([...replyStatements(), ...knowledgeStatements()])(
      'prepares the statement %s',
      async (_title, text) => {
        const client = await t.app.get(Database).pool.connect();
        try {
          await client.query(`PREPARE snapshot AS ${text}`);
          await client.query('DEALLOCATE snapshot');
        } finally {
          client.release();
        }
      },
    );
  });
});
