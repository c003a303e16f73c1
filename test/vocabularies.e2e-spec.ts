import { expectError, expectRequestId } from './support/assertions';
import { createTestApp, TestApp } from './support/test-app';

describe('Vocabularies (public)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('lists every published version newest first, with summary, added and removed', async () => {
    const response = await t.http().get('/v1/vocabularies/emotions/changelog');
    expect(response.status).toBe(200);
    expectRequestId(response);
    expect(response.body.has_more).toBe(false);
    const versions = response.body.data.map((entry: { version: string }) => entry.version);
    expect(versions).toEqual(['2.0.0', '1.2.0', '1.1.0', '1.0.0']);
    const times = response.body.data.map((entry: { published_at: string }) =>
      Date.parse(entry.published_at),
    );
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    for (const entry of response.body.data) {
      expect(Object.keys(entry).sort()).toEqual([
        'added',
        'published_at',
        'removed',
        'summary',
        'version',
      ]);
      expect(entry.published_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(entry.summary.length).toBeGreaterThan(20);
    }
    const v2 = response.body.data[0];
    expect(v2.removed).toEqual(['anticipation', 'trust']);
    expect(v2.added).toContain('gratitude');
  });

  it('pages the changelog with limit and starting_after', async () => {
    const first = await t.http().get('/v1/vocabularies/emotions/changelog?limit=1');
    expect(first.body).toEqual({
      data: [expect.objectContaining({ version: '2.0.0' })],
      has_more: true,
    });
    const next = await t
      .http()
      .get('/v1/vocabularies/emotions/changelog?limit=2&starting_after=2.0.0');
    expect(next.body.data.map((entry: { version: string }) => entry.version)).toEqual([
      '1.2.0',
      '1.1.0',
    ]);
    expect(next.body.has_more).toBe(true);
    const last = await t.http().get('/v1/vocabularies/emotions/changelog?starting_after=1.1.0');
    expect(last.body).toEqual({
      data: [expect.objectContaining({ version: '1.0.0' })],
      has_more: false,
    });
  });

  it('refuses bad paging parameters with 400 validation_failed', async () => {
    // `0x10`, `1e1` and ` 5` had been read as numbers (review).
    for (const query of [
      'limit=0',
      'limit=101',
      'limit=abc',
      'limit=1.5',
      'limit=0x10',
      'limit=1e1',
      'limit=%205',
      'limit=1&limit=2',
      'colour=red',
    ]) {
      const response = await t.http().get(`/v1/vocabularies/emotions/changelog?${query}`);
      expectError(response, 400, 'validation_failed');
      // One problem, the range: `1.5` was "not greater than 100", "not less than 1" and "not an
      // integer" at once (review).
      expect({ query, details: response.body.error.details }).toEqual({
        query,
        details:
          query === 'colour=red'
            ? [expect.objectContaining({ field: 'colour' })]
            : [{ field: 'limit', problem: 'limit must be a whole number from 1 to 100' }],
      });
    }
  });

  it('serves the latest vocabulary: 2.0.0, the 27 GoEmotions categories plus neutral', async () => {
    const response = await t.http().get('/v1/vocabularies/emotions');
    expect(response.status).toBe(200);
    expect(response.body.version).toBe('2.0.0');
    expect(response.body.emotions).toHaveLength(28);
    for (const emotion of response.body.emotions) {
      expect(emotion.description.length).toBeGreaterThan(10);
    }
  });

  it('serves a version by number: 1.0.0 is Plutchik’s eight', async () => {
    const response = await t.http().get('/v1/vocabularies/emotions/1.0.0');
    expect(response.status).toBe(200);
    expect(response.body.emotions.map((emotion: { name: string }) => emotion.name).sort()).toEqual([
      'anger',
      'anticipation',
      'disgust',
      'fear',
      'joy',
      'sadness',
      'surprise',
      'trust',
    ]);
  });

  it('answers an unknown version with 404 not_found', async () => {
    expectError(await t.http().get('/v1/vocabularies/emotions/9.9.9'), 404, 'not_found');
    expectError(await t.http().get('/v1/vocabularies/emotions/not-a-version'), 404, 'not_found');
  });

  it('answers with a strong ETag, and 304 with the same headers when If-None-Match names it', async () => {
    for (const path of [
      '/v1/vocabularies/emotions/changelog',
      '/v1/vocabularies/emotions/changelog?limit=1&starting_after=2.0.0',
      '/v1/vocabularies/emotions',
      '/v1/vocabularies/emotions/1.0.0',
    ]) {
      const first = await t.http().get(path);
      expect(first.status).toBe(200);
      const etag = first.headers.etag;
      expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
      expect(first.headers['cache-control']).toBe('no-cache');
      expect(first.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(Number(first.headers['content-length'])).toBe(Buffer.byteLength(first.text));

      const again = await t.http().get(path);
      expect(again.headers.etag).toBe(etag);
      expect(again.text).toBe(first.text);

      for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        const cached = await t.http().get(path).set('If-None-Match', ifNoneMatch);
        expect(cached.status).toBe(304);
        expect(cached.text).toBe('');
        expect(cached.headers.etag).toBe(etag);
        expect(cached.headers['x-content-type-options']).toBe('nosniff');
        expect(cached.headers['x-ratelimit-limit']).toBeDefined();
        expectRequestId(cached);
      }
      const stale = await t.http().get(path).set('If-None-Match', '"stale"');
      expect(stale.status).toBe(200);
      expect(stale.text).toBe(first.text);
    }
    const pages = await Promise.all(
      ['limit=1', 'limit=2'].map((query) =>
        t.http().get(`/v1/vocabularies/emotions/changelog?${query}`),
      ),
    );
    expect(pages[0].headers.etag).not.toBe(pages[1].headers.etag);
  });
});
