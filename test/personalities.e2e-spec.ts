import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CatalogEntryFile } from '../src/personalities/entities/personality-definition';
import { ensureBuilt, runBuilt } from './support/built-app';
import { expectError, expectRequestId } from './support/assertions';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { tenantWithKey } from './support/identity';
import { createTestApp, TestApp } from './support/test-app';

const shipped = JSON.parse(
  readFileSync(join(__dirname, '../src/personalities/data/catalog.json'), 'utf8'),
) as CatalogEntryFile[];

function catalogFile(entries: unknown): string {
  const path = join(mkdtempSync(join(tmpdir(), 'catalog-')), 'catalog.json');
  writeFileSync(path, typeof entries === 'string' ? entries : JSON.stringify(entries));
  return path;
}

/** `node dist/cli.js catalog import`, on this run's database; answers what it printed. */
async function importCatalog(entries: unknown): Promise<string> {
  const run = runBuilt('cli.js', ['catalog', 'import', catalogFile(entries)], {
    METRICS_PORT: '0',
  });
  if ((await run.exited) !== 0) throw new Error(run.output());
  return run.output();
}

describe('Personalities: catalog, clones, CRUD', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenantWithKey>>;

  beforeAll(async () => {
    ensureBuilt();
    t = await createTestApp();
    a = await tenantWithKey(t, ['read_write']);
  }, 180_000);
  afterAll(() => t.close());

  it('serves the seeded catalog (at least five complete entries) to read keys', async () => {
    const reader = await tenantWithKey(t, ['read']);
    const response = await t
      .http()
      .get('/v1/personalities/catalog?limit=100')
      .set('Authorization', reader.auth);
    expect(response.status).toBe(200);
    expectRequestId(response);
    const slugs = response.body.data.map((entry: { slug: string }) => entry.slug);
    for (const entry of shipped) expect(slugs).toContain(entry.slug);
    expect(shipped.length).toBeGreaterThanOrEqual(5);
    const sage = response.body.data.find((entry: { slug: string }) => entry.slug === 'sage-mentor');
    expect(sage).toEqual({
      ...shipped.find((entry) => entry.slug === 'sage-mentor'),
      updated_at: expect.any(String),
    });
    expectError(await t.http().get('/v1/personalities/catalog'), 401, 'unauthenticated');
  });

  it('clones an entry (201) with every field; unknown slug 404; read scope 403', async () => {
    const response = await t
      .http()
      .post('/v1/personalities/from-catalog')
      .set('Authorization', a.auth)
      .send({ slug: 'atlas-stoic' });
    expect(response.status).toBe(201);
    const entry = shipped.find((e) => e.slug === 'atlas-stoic')!;
    expect(response.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      source_slug: 'atlas-stoic',
      source_version: entry.version,
      model: null,
      language: 'en',
      name: entry.name,
      description: entry.description,
      traits: entry.traits,
      voice: entry.voice,
      system_prompt: entry.system_prompt,
      replies: entry.replies,
      tools: [],
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expectError(
      await t
        .http()
        .post('/v1/personalities/from-catalog')
        .set('Authorization', a.auth)
        .send({ slug: 'no-such-slug' }),
      404,
      'not_found',
    );
    const reader = await tenantWithKey(t, ['read']);
    expectError(
      await t
        .http()
        .post('/v1/personalities/from-catalog')
        .set('Authorization', reader.auth)
        .send({ slug: 'atlas-stoic' }),
      403,
      'insufficient_scope',
    );
    expectError(
      await t
        .http()
        .post('/v1/personalities/from-catalog')
        .set('Authorization', a.auth)
        .send({ slug: 'atlas-stoic', extra: 1 }),
      400,
      'validation_failed',
    );
  });

  it('a clone is independent: a later catalog import (the CLI path) does not reach it', async () => {
    const slug = `test-${uniqueUserId('slug').toLowerCase()}`;
    const base = { ...shipped[0], slug, version: '1.0.0' };
    await importCatalog([base]);
    const id = await clonePersonality(t, a.auth, slug);
    const before = await t.http().get(`/v1/personalities/${id}`).set('Authorization', a.auth);

    const changed = {
      ...base,
      version: '1.1.0',
      name: 'Changed',
      traits: ['different'],
      voice: { ...base.voice, tone: 'changed' },
      replies: { ...base.replies, positive: ['changed {emotion}'] },
    };
    const message = await importCatalog([changed]);
    expect(message).toContain(`${slug}@1.1.0`);
    const catalog = await t
      .http()
      .get(`/v1/personalities/catalog?limit=1&starting_after=${slug.slice(0, -1)}`)
      .set('Authorization', a.auth);
    expect(catalog.body.data[0]).toMatchObject({ slug, name: 'Changed', version: '1.1.0' });

    const after = await t.http().get(`/v1/personalities/${id}`).set('Authorization', a.auth);
    expect(after.body).toEqual(before.body);
    expect(after.body.name).toBe(base.name);
    // A new clone takes the new version.
    const newer = await clonePersonality(t, a.auth, slug);
    const newerBody = await t.http().get(`/v1/personalities/${newer}`).set('Authorization', a.auth);
    expect(newerBody.body).toMatchObject({ name: 'Changed', source_version: '1.1.0' });
  });

  it('lists, reads, patches and deletes the organization’s personalities', async () => {
    const tenant = await tenantWithKey(t, ['read_write']);
    const ids = [
      await clonePersonality(t, tenant.auth, 'sage-mentor'),
      await clonePersonality(t, tenant.auth, 'pip-playful'),
      await clonePersonality(t, tenant.auth, 'sunny-coach'),
    ];
    const page1 = await t.http().get('/v1/personalities?limit=2').set('Authorization', tenant.auth);
    expect(page1.body.data.map((p: { id: string }) => p.id)).toEqual(ids.slice(0, 2));
    expect(page1.body.has_more).toBe(true);
    const page2 = await t
      .http()
      .get(`/v1/personalities?limit=2&starting_after=${ids[1]}`)
      .set('Authorization', tenant.auth);
    expect(page2.body).toEqual({
      data: [expect.objectContaining({ id: ids[2] })],
      has_more: false,
    });

    const patched = await t
      .http()
      .patch(`/v1/personalities/${ids[0]}`)
      .set('Authorization', tenant.auth)
      .send({ name: 'Sage (ours)', voice: { tone: 'dry', formality: 'formal', style_notes: '' } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      id: ids[0],
      name: 'Sage (ours)',
      voice: { tone: 'dry', formality: 'formal', style_notes: '' },
      source_slug: 'sage-mentor',
    });
    expectError(
      await t
        .http()
        .patch(`/v1/personalities/${ids[0]}`)
        .set('Authorization', tenant.auth)
        .send({ voice: { tone: 'x', formality: 'shouty', style_notes: '' } }),
      400,
      'validation_failed',
    );
    expectError(
      await t
        .http()
        .patch(`/v1/personalities/${ids[0]}`)
        .set('Authorization', tenant.auth)
        .send({ replies: { positive: [] } }),
      400,
      'validation_failed',
    );

    const deleted = await t
      .http()
      .delete(`/v1/personalities/${ids[2]}`)
      .set('Authorization', tenant.auth);
    expect(deleted.status).toBe(204);
    expectError(
      await t.http().get(`/v1/personalities/${ids[2]}`).set('Authorization', tenant.auth),
      404,
      'not_found',
    );
    expectError(
      await t.http().get('/v1/personalities/not-a-uuid').set('Authorization', tenant.auth),
      404,
      'not_found',
    );
  });

  it('concurrent PATCHes of different fields all land; one racing a DELETE never brings it back', async () => {
    const patch = (id: string, body: Record<string, unknown>) =>
      t.http().patch(`/v1/personalities/${id}`).set('Authorization', a.auth).send(body);
    const id = await clonePersonality(t, a.auth, 'sage-mentor');
    for (const round of [1, 2, 3]) {
      const answers = await Promise.all([
        patch(id, { name: `Sage ${round}` }),
        patch(id, { description: `Round ${round} of a wise mentor` }),
        patch(id, { traits: [`patient-${round}`] }),
        patch(id, { system_prompt: `Answer calmly, round ${round}.` }),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
      const stored = await t.http().get(`/v1/personalities/${id}`).set('Authorization', a.auth);
      expect({ round, ...stored.body }).toMatchObject({
        round,
        name: `Sage ${round}`,
        description: `Round ${round} of a wise mentor`,
        traits: [`patient-${round}`],
        system_prompt: `Answer calmly, round ${round}.`,
      });
    }
    for (let attempt = 0; attempt < 5; attempt++) {
      const doomed = await clonePersonality(t, a.auth, 'sage-mentor');
      const [changed, deleted] = await Promise.all([
        patch(doomed, { name: 'Still here?' }),
        t.http().delete(`/v1/personalities/${doomed}`).set('Authorization', a.auth),
      ]);
      expect(deleted.status).toBe(204);
      expect([200, 404]).toContain(changed.status);
      const after = await t.http().get(`/v1/personalities/${doomed}`).set('Authorization', a.auth);
      expect({ attempt, status: after.status }).toEqual({ attempt, status: 404 });
    }
  });

  it('tenant isolation: organization B gets 404 for A’s personality', async () => {
    const b = await tenantWithKey(t, ['read_write']);
    const id = await clonePersonality(t, a.auth);
    for (const request of [
      t.http().get(`/v1/personalities/${id}`),
      t.http().patch(`/v1/personalities/${id}`).send({ name: 'stolen' }),
      t.http().delete(`/v1/personalities/${id}`),
    ]) {
      expectError(await request.set('Authorization', b.auth), 404, 'not_found');
    }
    const list = await t.http().get('/v1/personalities').set('Authorization', b.auth);
    expect(list.body).toEqual({ data: [], has_more: false });
    const mine = await t.http().get(`/v1/personalities/${id}`).set('Authorization', a.auth);
    expect(mine.body.name).not.toBe('stolen');
  });

  it('PATCH refuses null for every field (400) and the personality still answers', async () => {
    const id = await clonePersonality(t, a.auth);
    for (const field of ['name', 'description', 'traits', 'voice', 'system_prompt', 'replies']) {
      const response = await t
        .http()
        .patch(`/v1/personalities/${id}`)
        .set('Authorization', a.auth)
        .send({ [field]: null });
      expectError(response, 400, 'validation_failed');
      expect(response.body.error.details).toEqual(
        expect.arrayContaining([expect.objectContaining({ field })]),
      );
    }
    // A stored null replies made every first reply fail: a new end user still gets one.
    const reply = await t
      .http()
      .post('/v1/respond')
      .set('Authorization', a.auth)
      .send({ personality_id: id, user_id: uniqueUserId(), message: 'hello there' });
    expect(reply.status).toBe(200);
  });
});
