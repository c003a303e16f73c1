import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { FakeEmbeddings } from './support/fake-embeddings';
import { tenantWithKey } from './support/identity';
import { createFreshDatabase, type FreshDatabase } from './support/fresh-database';
import { createTestApp, type TestApp } from './support/test-app';
import { eventually } from './support/wait';

type Tenant = Awaited<ReturnType<typeof tenantWithKey>>;

interface Hit {
  document_id: string;
  title: string;
  chunk_index: number;
  text: string;
  score: number;
}

/** Shares no word with the questions below: found by its meaning ('travel' to the fake) alone. */
const LEAVE = 'Staff vacation: a trip to Crete island.';
const CANTEEN = 'Dinner is served in the canteen after six.';
const QUESTION = 'How much holiday do I get?';

/**
 * Knowledge chunks embedded by the background worker, and knowledge search and retrieval merging
 * the full-text and the embedding rankings (contract §27). The provider is
 * test/support/fake-embeddings.ts, whose embedder puts holiday, vacation, trip, Crete and island
 * on one concept.
 */
describe('Knowledge by meaning (contract §27)', () => {
  const fake = new FakeEmbeddings();
  let db: Client;
  /** Without EMBEDDINGS_MODEL: as before embeddings. */
  let off: TestApp;
  /** With embeddings on, started once the off state is checked. */
  let on: TestApp | undefined;
  let a: Tenant;
  let b: Tenant;
  let aPersonality: string;
  let bPersonality: string;
  let leaveId: string;
  /**
   * A database of its own: the checks count every chunk and embedding, and the other specs of
   * the run leave theirs in the shared one.
   */
  let database: FreshDatabase;

  beforeAll(async () => {
    await fake.start();
    database = await createFreshDatabase('knowledge_embeddings', process.env.DATABASE_URL);
    db = new Client({ connectionString: database.url });
    await db.connect();
    off = await createTestApp({ env: { DATABASE_URL: database.url } });
    a = await tenantWithKey(off, ['read_write']);
    b = await tenantWithKey(off, ['read_write']);
    aPersonality = await clonePersonality(off, a.auth);
    bPersonality = await clonePersonality(off, b.auth);
    leaveId = await create(a, 'Leave', LEAVE);
    await create(a, 'Canteen', CANTEEN);
  });
  afterAll(async () => {
    for (const app of [on, off]) await app?.close();
    await db.end();
    await fake.stop();
    await database.drop();
  });

  async function create(tenant: Tenant, title: string, content: string): Promise<string> {
    const response = await off
      .http()
      .post('/v1/knowledge')
      .set('Authorization', tenant.auth)
      .send({ title, content });
    expect(response.status).toBe(201);
    return response.body.id as string;
  }
  async function search(app: TestApp, tenant: Tenant, q: string): Promise<Hit[]> {
    const response = await app
      .http()
      .get('/v1/knowledge/search')
      .query({ q })
      .set('Authorization', tenant.auth);
    expect(response.status).toBe(200);
    return response.body.data as Hit[];
  }
  async function citations(app: TestApp, tenant: Tenant, personalityId: string, message: string) {
    const response = await app
      .http()
      .post('/v1/respond')
      .set('Authorization', tenant.auth)
      .send({ personality_id: personalityId, user_id: uniqueUserId('kemb'), message });
    expect(response.status).toBe(200);
    return response.body.citations as { document_id: string; title: string }[];
  }
  async function count(query: string, values: unknown[] = []): Promise<number> {
    const { rows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${query}`,
      values,
    );
    return rows[0].n;
  }
  const startOn = () =>
    createTestApp({
      env: {
        DATABASE_URL: database.url,
        EMBEDDINGS_MODEL: 'fake-embed',
        EMBEDDINGS_BASE_URL: fake.url,
        EMBEDDINGS_API_KEY: 'sk-embeddings',
        EMBEDDINGS_POLL_INTERVAL_MS: '50',
        EMBEDDINGS_QUERY_TIMEOUT_MS: '500',
      },
    });
  /** Every chunk has its embedding (answers how many there are). */
  const allEmbedded = () =>
    eventually(async () => {
      const missing = await count(
        `knowledge_chunks k
          WHERE NOT EXISTS (SELECT 1 FROM knowledge_chunk_embeddings e WHERE e.chunk_id = k.id)`,
      );
      return missing === 0 ? count('knowledge_chunk_embeddings') : undefined;
    }, 'every knowledge chunk embedded');

  it('is off without EMBEDDINGS_MODEL: the paraphrase is neither found nor cited, nothing is sent or written', async () => {
    expect(await search(off, a, QUESTION)).toEqual([]);
    expect(await citations(off, a, aPersonality, QUESTION)).toEqual([]);
    // Found by its words, as before.
    expect((await search(off, a, 'Crete')).map((hit) => hit.text)).toEqual([LEAVE]);
    expect(fake.requests).toHaveLength(0);
    expect(await count('knowledge_chunk_embeddings')).toBe(0);
  });

  it('embeds every chunk with its organization, and finds and cites a paraphrase by its meaning', async () => {
    on = await startOn();
    expect(await allEmbedded()).toBe(await count('knowledge_chunks'));
    expect(
      await count(
        `knowledge_chunk_embeddings e JOIN knowledge_chunks k ON k.id = e.chunk_id
          WHERE e.organization_id = k.organization_id AND e.document_id = k.document_id
            AND e.model LIKE 'fake-embed%'`,
      ),
    ).toBe(await count('knowledge_chunks'));
    const hits = await search(on, a, QUESTION);
    expect(hits.map((hit) => hit.text)).toEqual([LEAVE]);
    expect(hits[0].document_id).toBe(leaveId);
    const asked = () => fake.requests.filter((r) => r.input.includes(QUESTION)).length;
    const askedBefore = asked();
    expect(await citations(on, a, aPersonality, QUESTION)).toEqual([
      { document_id: leaveId, title: 'Leave', chunk_index: 0 },
    ]);
    // Memory recall and knowledge retrieval share the message's one embedding.
    expect(asked() - askedBefore).toBe(1);
    // The fusion keeps the full-text ranking: a word of the canteen's still finds it first.
    expect((await search(on, a, 'canteen holiday'))[0].text).toBe(CANTEEN);
  });

  it("a patched document's new chunks are embedded again, the old ones' embeddings gone", async () => {
    await allEmbedded();
    const before = await db.query<{ id: string }>(
      'SELECT id::text FROM knowledge_chunks WHERE document_id = $1',
      [leaveId],
    );
    const patched =
      'Staff vacation: a journey abroad to the beach.\n\nA second paragraph of rules.';
    const response = await on!
      .http()
      .patch(`/v1/knowledge/${leaveId}`)
      .set('Authorization', a.auth)
      .send({ content: patched });
    expect(response.status).toBe(200);
    await allEmbedded();
    const oldIds = before.rows.map((row) => row.id);
    expect(
      await count('knowledge_chunk_embeddings WHERE chunk_id = ANY($1::bigint[])', [oldIds]),
    ).toBe(0);
    expect(
      await count(
        `knowledge_chunk_embeddings e JOIN knowledge_chunks k ON k.id = e.chunk_id
          WHERE k.document_id = $1`,
        [leaveId],
      ),
    ).toBe(await count('knowledge_chunks WHERE document_id = $1', [leaveId]));
    expect((await search(on!, a, QUESTION))[0].text).toContain('journey abroad');
  });

  it('a patch keeps the chunks whose text it keeps, with their embeddings: only new text is sent', async () => {
    // Each paragraph is a chunk of its own (two together pass 1,000 characters).
    const paragraph = (word: string) =>
      `The ${word} rule. ${`Staff follow the ${word} rule every day of the week. `.repeat(12)}`.trim();
    const [p0, p1, p2, p3, p3b] = ['zebra', 'walrus', 'otter', 'badger', 'heron'].map(paragraph);
    const id = await create(a, 'Rules', [p1, p2, p3].join('\n\n'));
    await allEmbedded();
    const chunks = async () =>
      (
        await db.query<{ id: string; chunk_index: number; text: string }>(
          'SELECT id::text, chunk_index, text FROM knowledge_chunks WHERE document_id = $1 ORDER BY chunk_index',
          [id],
        )
      ).rows;
    const before = await chunks();
    expect(before.map((chunk) => chunk.text)).toEqual([p1, p2, p3]);
    const patch = async (content: string[]) => {
      const sent = fake.inputs.length;
      const response = await on!
        .http()
        .patch(`/v1/knowledge/${id}`)
        .set('Authorization', a.auth)
        .send({ content: content.join('\n\n') });
      expect(response.status).toBe(200);
      expect(response.body.chunks).toBe(content.length);
      await allEmbedded();
      return fake.inputs.slice(sent).filter((input) => content.includes(input));
    };

    // A paragraph before, the last one changed: the two kept move one down, with their ids.
    expect((await patch([p0, p1, p2, p3b])).sort()).toEqual([p0, p3b].sort());
    const after = await chunks();
    expect(after.map((chunk) => chunk.text)).toEqual([p0, p1, p2, p3b]);
    expect(after.slice(1, 3).map((chunk) => chunk.id)).toEqual(before.slice(0, 2).map((c) => c.id));
    expect(
      await count('knowledge_chunk_embeddings WHERE chunk_id = ANY($1::bigint[])', [
        after.map((chunk) => chunk.id),
      ]),
    ).toBe(4);
    expect(await count('knowledge_chunk_embeddings WHERE chunk_id = $1', [before[2].id])).toBe(0);
    // Found by their words at their new positions; the text gone is not.
    const otter = await search(on!, a, 'otter');
    expect(otter.map((hit) => [hit.chunk_index, hit.text])).toEqual([[2, p2]]);
    expect(await search(on!, a, 'badger')).toEqual([]);

    // Swapped, one gone and a text repeated: nothing new but the repeat's second chunk.
    expect(await patch([p2, p1, p2])).toEqual([p2]);
    const swapped = await chunks();
    expect(swapped.map((chunk) => chunk.text)).toEqual([p2, p1, p2]);
    expect(swapped.slice(0, 2).map((chunk) => chunk.id)).toEqual([after[2].id, after[1].id]);
    expect(Number(swapped[2].id)).toBeGreaterThan(Number(after[3].id));
    expect((await search(on!, a, 'otter')).map((hit) => hit.chunk_index).sort()).toEqual([0, 2]);
    expect(await search(on!, a, 'zebra')).toEqual([]);
  });

  it("keeps organizations apart: another's chunks are never compared, found or cited", async () => {
    const bLeave = await create(b, 'B leave', 'Our vacation on the island of Crete.');
    await allEmbedded();
    expect(
      await count(
        `knowledge_chunk_embeddings e JOIN knowledge_chunks k ON k.id = e.chunk_id
          WHERE k.document_id = $1 AND e.organization_id = $2`,
        [bLeave, b.organizationId],
      ),
    ).toBe(1);
    const bHits = await search(on!, b, QUESTION);
    expect(bHits.map((hit) => hit.document_id)).toEqual([bLeave]);
    expect((await search(on!, a, QUESTION)).map((hit) => hit.document_id)).toEqual([leaveId]);
    expect((await citations(on!, b, bPersonality, QUESTION)).map((c) => c.document_id)).toEqual([
      bLeave,
    ]);
  });

  it("sends no question to the provider for a personality of another organization's, or of none", async () => {
    const question = `${QUESTION} ${randomUUID()}`;
    const searchAs = (personalityId: string) =>
      on!
        .http()
        .get('/v1/knowledge/search')
        .query({ q: question, personality_id: personalityId })
        .set('Authorization', a.auth);
    for (const personalityId of [bPersonality, randomUUID()]) {
      const found = await searchAs(personalityId);
      expect(found.status).toBe(200);
      expect(found.body.data).toEqual([]);
    }
    // Its own personality's search sends it: the check can fail.
    expect((await searchAs(aPersonality)).status).toBe(200);
    expect(fake.inputs.filter((input) => input === question)).toHaveLength(1);
  });

  it('a reply finds by meaning only what its personality draws on, all documents or some', async () => {
    await allEmbedded();
    const other = await clonePersonality(off, a.auth);
    const attach = async (personalityIds: string[] | null) => {
      const response = await on!
        .http()
        .patch(`/v1/knowledge/${leaveId}`)
        .set('Authorization', a.auth)
        .send({ personality_ids: personalityIds });
      expect(response.status).toBe(200);
    };
    const cited = async (personalityId: string) =>
      (await citations(on!, a, personalityId, QUESTION)).map((c) => c.document_id);
    try {
      // Leave is the other personality's alone; the canteen's stays everyone's.
      await attach([other]);
      expect(await cited(aPersonality)).toEqual([]);
      // The other draws on every document of the organization (the reply reads sketches alone).
      expect(await cited(other)).toEqual([leaveId]);
      await attach(null);
      expect(await cited(aPersonality)).toEqual([leaveId]);
    } finally {
      await attach(null);
    }
  });

  it("a deleted document's embeddings go with it", async () => {
    await allEmbedded();
    const ids = await db.query<{ id: string }>(
      'SELECT id::text FROM knowledge_chunks WHERE document_id = $1',
      [leaveId],
    );
    expect(ids.rows.length).toBeGreaterThan(0);
    const response = await on!
      .http()
      .delete(`/v1/knowledge/${leaveId}`)
      .set('Authorization', a.auth);
    expect(response.status).toBe(204);
    expect(
      await count('knowledge_chunk_embeddings WHERE chunk_id = ANY($1::bigint[])', [
        ids.rows.map((row) => row.id),
      ]),
    ).toBe(0);
    expect(await search(on!, a, QUESTION)).toEqual([]);
  });
});
