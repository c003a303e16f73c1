import { allowedModels, engineConfig } from './engine.config';

describe('engine configuration', () => {
  const saved = { ...process.env };
  const load = (env: Record<string, string>) => {
    process.env = { ...saved, RESPONSE_ENGINE: 'openai', OPENAI_MODEL: 'gpt-main', ...env };
    return engineConfig();
  };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('defaults to no fallbacks, one retry, a 5-failure breaker of 30 s and 1024 tokens', () => {
    for (const name of [
      'OPENAI_FALLBACKS',
      'ENGINE_RETRIES',
      'ENGINE_BREAKER_FAILURES',
      'ENGINE_BREAKER_COOLDOWN_MS',
      'ENGINE_MAX_TOKENS',
    ]) {
      delete saved[name];
    }
    expect(load({})).toMatchObject({
      fallbacks: [],
      retries: 1,
      breakerFailures: 5,
      breakerCooldownMs: 30_000,
      maxTokens: 1024,
    });
    expect(load({ OPENAI_FALLBACKS: '[]' }).fallbacks).toEqual([]);
    // An empty value is unset, as everywhere else.
    expect(load({ OPENAI_FALLBACKS: '' }).fallbacks).toEqual([]);
  });

  it('reads fallbacks in order, with the primary base URL and key unless they name their own', () => {
    const config = load({
      OPENAI_BASE_URL: 'https://api.openai.com/v1',
      OPENAI_API_KEY: 'sk-primary',
      LOCAL_LLM_KEY: 'sk-local',
      OPENAI_FALLBACKS: JSON.stringify([
        { model: 'gpt-small' },
        { model: 'llama3.1', base_url: 'http://ollama:11434/v1', api_key_env: 'LOCAL_LLM_KEY' },
      ]),
    });
    expect(config.fallbacks).toEqual([
      { model: 'gpt-small', baseUrl: 'https://api.openai.com/v1', apiKey: 'sk-primary' },
      { model: 'llama3.1', baseUrl: 'http://ollama:11434/v1', apiKey: 'sk-local' },
    ]);
  });

  it.each([
    ['not JSON', '[{model: gpt}', /OPENAI_FALLBACKS: is not JSON/],
    ['not an array', '{"model":"gpt"}', /OPENAI_FALLBACKS: must be a JSON array/],
    ['an entry that is not an object', '["gpt"]', /OPENAI_FALLBACKS\[0\]: must be a JSON array/],
    ['no model', '[{"base_url":"http://x/v1"}]', /OPENAI_FALLBACKS\[0\]\.model: required/],
    ['an empty model', '[{"model":" "}]', /OPENAI_FALLBACKS\[0\]\.model/],
    ['a model that is not a string', '[{"model":4}]', /OPENAI_FALLBACKS\[0\]\.model/],
    [
      'an unset key variable',
      '[{"model":"a"},{"model":"b","api_key_env":"NO_SUCH_KEY_VARIABLE"}]',
      /OPENAI_FALLBACKS\[1\]\.api_key_env: NO_SUCH_KEY_VARIABLE is not set/,
    ],
    [
      'a key variable that is no name',
      '[{"model":"a","api_key_env":"sk-123 456"}]',
      /OPENAI_FALLBACKS\[0\]\.api_key_env: must be the name/,
    ],
    [
      'a base_url that is not http(s)',
      '[{"model":"a","base_url":"ftp://host/v1"}]',
      /OPENAI_FALLBACKS\[0\]\.base_url: must be an http/,
    ],
    [
      'a base_url that is no URL',
      '[{"model":"a","base_url":"localhost:11434"}]',
      /OPENAI_FALLBACKS\[0\]\.base_url/,
    ],
    [
      'an unknown field',
      '[{"model":"a","api_key":"sk-x"}]',
      /OPENAI_FALLBACKS\[0\]\.api_key: unknown/,
    ],
    ['too many', JSON.stringify(Array(9).fill({ model: 'a' })), /OPENAI_FALLBACKS: at most 8/],
  ])('stops on %s, naming the variable', (_case, value, message) => {
    expect(() => load({ OPENAI_FALLBACKS: value })).toThrow(message);
  });

  it('checks OPENAI_FALLBACKS with the local engine too: a bad value is a mistake either way', () => {
    process.env = { ...saved, RESPONSE_ENGINE: 'local', OPENAI_FALLBACKS: 'nope' };
    expect(() => engineConfig()).toThrow(/OPENAI_FALLBACKS/);
  });

  it('names a bad number', () => {
    for (const [name, value] of [
      ['ENGINE_RETRIES', '-1'],
      ['ENGINE_RETRIES', 'twice'],
      ['ENGINE_BREAKER_FAILURES', '0'],
      ['ENGINE_BREAKER_COOLDOWN_MS', '10'],
      ['ENGINE_MAX_TOKENS', '0'],
      ['ENGINE_MAX_TOKENS', '1.5'],
    ]) {
      expect(() => load({ [name]: value })).toThrow(new RegExp(name));
    }
  });
});

describe('OPENAI_ALLOWED_MODELS', () => {
  const fallback = (model: string) => ({ model, baseUrl: undefined, apiKey: 'k' });

  it('is the list given, trimmed and without repeats', () => {
    expect(allowedModels(' a, b ,a', { model: 'main', fallbacks: [fallback('backup')] })).toEqual([
      'a',
      'b',
    ]);
  });

  it("defaults to OPENAI_MODEL and the fallbacks' models; none with the local engine alone", () => {
    expect(
      allowedModels(undefined, {
        model: 'main',
        fallbacks: [fallback('backup'), fallback('main')],
      }),
    ).toEqual(['main', 'backup']);
    expect(allowedModels('', { model: '', fallbacks: [] })).toEqual([]);
  });

  it('stops start-up on an empty name, naming the variable', () => {
    expect(() => allowedModels('a,,b', { model: '', fallbacks: [] })).toThrow(
      /OPENAI_ALLOWED_MODELS/,
    );
  });
});
