import { embeddingsConfig } from './embeddings.config';

describe('embeddings config', () => {
  const saved = { ...process.env };
  const withEnv = (env: Record<string, string>) => {
    process.env = { ...saved };
    for (const name of Object.keys(process.env)) {
      if (name.startsWith('EMBEDDINGS_')) delete process.env[name];
    }
    Object.assign(process.env, env);
    return embeddingsConfig();
  };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('is off without EMBEDDINGS_MODEL, with its defaults', () => {
    expect(withEnv({})).toEqual({
      model: null,
      baseUrl: undefined,
      apiKey: undefined,
      dimensions: undefined,
      batchSize: 64,
      pollIntervalMs: 1_000,
      queryTimeoutMs: 300,
      candidates: 5000,
      minSimilarity: 0.3,
    });
    expect(withEnv({ EMBEDDINGS_MODEL: '' }).model).toBeNull();
  });

  it('reads every variable', () => {
    expect(
      withEnv({
        EMBEDDINGS_MODEL: 'text-embedding-3-small',
        EMBEDDINGS_BASE_URL: 'http://127.0.0.1:11434/v1',
        EMBEDDINGS_API_KEY: 'sk-e',
        EMBEDDINGS_DIMENSIONS: '256',
        EMBEDDINGS_BATCH_SIZE: '8',
        EMBEDDINGS_POLL_INTERVAL_MS: '250',
        EMBEDDINGS_QUERY_TIMEOUT_MS: '100',
        EMBEDDINGS_CANDIDATES: '2000',
        EMBEDDINGS_MIN_SIMILARITY: '0.45',
      }),
    ).toEqual({
      model: 'text-embedding-3-small',
      baseUrl: 'http://127.0.0.1:11434/v1',
      apiKey: 'sk-e',
      dimensions: 256,
      batchSize: 8,
      pollIntervalMs: 250,
      queryTimeoutMs: 100,
      candidates: 2_000,
      minSimilarity: 0.45,
    });
  });

  it.each([
    ['EMBEDDINGS_BASE_URL', 'not a url'],
    ['EMBEDDINGS_DIMENSIONS', '0'],
    ['EMBEDDINGS_BATCH_SIZE', '5000'],
    ['EMBEDDINGS_POLL_INTERVAL_MS', '1'],
    ['EMBEDDINGS_QUERY_TIMEOUT_MS', 'soon'],
    ['EMBEDDINGS_CANDIDATES', '100001'],
    ['EMBEDDINGS_MIN_SIMILARITY', '2'],
  ])('stops start-up on %s=%s, naming the variable', (name, value) => {
    expect(() => withEnv({ EMBEDDINGS_MODEL: 'm', [name]: value })).toThrow(new RegExp(name));
  });
});
