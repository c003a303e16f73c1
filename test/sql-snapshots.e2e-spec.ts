import { readFileSync } from 'node:fs';
import { DiscoveryService } from '@nestjs/core';
import { join } from 'node:path';
import { Database } from '../src/database/database';
import {
  knowledgeStatements,
  memoryStatements,
  QUERIES_DIR,
  renderQueries,
  replyStatements,
  SNAPSHOT_PARTICIPANTS,
} from '../src/queries/statements';
import { AdmitsReplies, StoresReplies } from '../src/common/reply/reply-store';
import { createTestApp, type TestApp } from './support/test-app';

describe('checked-in statements (src/queries)', () => {
  it('each composed file holds the statements the service sends', async () => {
    const files = await renderQueries();
    expect([...files.keys()]).toEqual([
      'conversation.repository.sql',
      'memories.repository.sql',
      'respond.repository.sql',
      'knowledge.repository.sql',
    ]);
    for (const [file, content] of files) {
      const checkedIn = readFileSync(join(QUERIES_DIR, file), 'utf8');
      if (checkedIn !== content) {
        throw new Error(
          `src/queries/${file} differs from the statements sent: run npm run sql:generate`,
        );
      }
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
    it('composes the reply with the participants the app finds, no fewer and no more', () => {
      const discovery = t.app.get(DiscoveryService);
      const found = (metadataKey: string) =>
        discovery
          .getProviders({ metadataKey })
          .map((wrapper) => String(wrapper.name))
          .sort();
      const names = (classes: Array<{ name: string }>) => classes.map(({ name }) => name).sort();
      expect(found(StoresReplies.KEY)).toEqual(names(SNAPSHOT_PARTICIPANTS.stores));
      expect(found(AdmitsReplies.KEY)).toEqual(names(SNAPSHOT_PARTICIPANTS.admitters));
    });

    it('prepares every composed statement', async () => {
      const statements = [
        ...(await replyStatements()),
        ...knowledgeStatements(),
        ...memoryStatements().map(([, title, text]): [string, string] => [title, text]),
      ];
      const client = await t.app.get(Database).pool.connect();
      try {
        for (const [title, text] of statements) {
          await client.query(`PREPARE snapshot AS ${text}`).catch((error: Error) => {
            throw new Error(`${title}: ${error.message}`);
          });
          await client.query('DEALLOCATE snapshot');
        }
      } finally {
        client.release();
      }
    });
  });
});
