import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, type QueryConfig } from 'pg';
import type { ApiKeyCaller } from '../src/common/auth/caller';
import { QUERIES_DIR } from '../src/queries/statements';
import { RespondService } from '../src/respond/respond.service';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { tenantWithKey } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';

const FILE = 'respond.service.sql';

/** Set by `npm run sql:generate`: the spec writes the file instead of comparing with it. */
const WRITE = process.env.SQL_SNAPSHOTS === 'write';

/**
 * Every statement one reply sends, by what the reply is: recorded from the driver (pg's
 * Client#query, which TypeORM's statements go through too) while RespondService answers, within
 * the reply's own asynchronous context, so background jobs' statements are not counted. The
 * checked-in file (src/queries/respond.service.sql) shows a reviewer what a reply costs, and this
 * spec fails when a change adds, removes or rewrites one of its statements.
 */
describe('the statements one reply sends (src/queries/respond.service.sql)', () => {
  let t: TestApp;
  let replies: RespondService;
  const recording = new AsyncLocalStorage<string[]>();
  const originalQuery = Client.prototype.query;

  beforeAll(async () => {
    t = await createTestApp();
    replies = t.app.get(RespondService);
    // pg calls its own query() again for nothing; only the caller's statements are recorded.
    Client.prototype.query = function (this: Client, ...args: unknown[]) {
      const statements = recording.getStore();
      const config = args[0] as string | QueryConfig;
      if (statements) statements.push(typeof config === 'string' ? config : config.text);
      return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof Client.prototype.query;
  });

  afterAll(async () => {
    Client.prototype.query = originalQuery;
    await t?.close();
  });

  /** A fresh organization and personality, and the reply's caller. */
  async function tenant() {
    const { organizationId, auth } = await tenantWithKey(t, ['read_write']);
    const personalityId = await clonePersonality(t, auth, 'sage-mentor');
    const caller: ApiKeyCaller = {
      kind: 'api_key',
      organizationId,
      apiKeyId: randomUUID(),
      scopes: ['read_write'],
    };
    return { auth, personalityId, caller };
  }

  /** The statements of one reply, in the order they were sent. */
  async function statementsOf(
    caller: ApiKeyCaller,
    body: { personality_id: string; user_id: string; message: string },
  ): Promise<string[]> {
    const statements: string[] = [];
    const answer = await recording.run(statements, () =>
      replies.respond(caller, body, { signal: new AbortController().signal }),
    );
    expect(answer.status).toBe('completed');
    return statements;
  }

  /**
   * A statement as the file shows it: no blank lines or trailing spaces, and the indentation of
   * the source it was written in taken off its lines after the first.
   */
  function readable(text: string): string {
    const [first, ...rest] = text
      .split('\n')
      .map((line) => line.trimEnd())
      .filter((line) => line.trim() !== '');
    const indent = Math.min(...rest.map((line) => line.length - line.trimStart().length));
    return [first.trim(), ...rest.map((line) => line.slice(indent))].join('\n');
  }

  /**
   * The section of the file for one kind of reply. Sorted: the reads a reply starts at once may
   * reach the driver in either order. A statement sent twice is listed twice.
   */
  function section(title: string, statements: string[]): string {
    const texts = statements.map(readable);
    return [`-- ${title}`, ...texts.sort().map((text) => `${text};`)].join('\n');
  }

  it('matches the checked-in file, reply by reply', async () => {
    const sections: string[] = [];

    // The organization's first reply: the caches (safety settings, budgets, documents) are cold.
    const first = await tenant();
    const userId = uniqueUserId();
    const message = { personality_id: first.personalityId, user_id: userId };
    sections.push(
      section(
        "an organization's first reply, to an end user met for the first time",
        await statementsOf(first.caller, { ...message, message: 'I started a new job today' }),
      ),
    );
    sections.push(
      section(
        'a later reply to the same end user (memories to recall, caches warm)',
        await statementsOf(first.caller, { ...message, message: 'The new job is hard' }),
      ),
    );

    // An organization whose personality draws on a document: its passages are read and cited.
    const second = await tenant();
    await t
      .http()
      .post('/v1/knowledge')
      .set('Authorization', second.auth)
      .send({ title: 'Opening hours', content: 'We open at nine on weekdays and ten on Sundays.' })
      .expect(201);
    const reader = { personality_id: second.personalityId, user_id: uniqueUserId() };
    await statementsOf(second.caller, { ...reader, message: 'Hello there' });
    sections.push(
      section(
        'a reply whose personality draws on documents (caches warm)',
        await statementsOf(second.caller, { ...reader, message: 'When do you open on Sundays?' }),
      ),
    );

    const content = `-- AUTOGENERATED by npm run sql:generate; do not edit.\n\n${sections.join('\n\n')}\n`;
    const path = join(QUERIES_DIR, FILE);
    if (WRITE) {
      writeFileSync(path, content);
      return;
    }
    if (readFileSync(path, 'utf8') !== content) {
      throw new Error(
        `src/queries/${FILE} differs from the statements sent: run npm run sql:generate`,
      );
    }
  });
});
