import OpenAI from 'openai';
import { FakeOpenAI } from './support/fake-openai';

/**
 * The fake OpenAI server itself, driven by the official SDK the service uses: if these pass, what
 * the service's specs see through the fake is what the SDK makes of OpenAI's wire format.
 */
describe('FakeOpenAI (through the openai SDK)', () => {
  let fake: FakeOpenAI;
  let client: OpenAI;
  const responseFormat = {
    type: 'json_schema' as const,
    json_schema: {
      name: 'reply',
      strict: true,
      schema: {
        type: 'object',
        properties: {
          text: { type: 'string' },
          emotion: { type: 'string', enum: ['joy', 'sadness', 'neutral'] },
          intensity: { type: 'number' },
        },
        required: ['text', 'emotion', 'intensity'],
        additionalProperties: false,
      },
    },
  };
  const ask = (message: string) => ({
    model: 'gpt-test',
    messages: [
      { role: 'system' as const, content: 'You are Sage.' },
      { role: 'user' as const, content: message },
    ],
    response_format: responseFormat,
  });

  beforeAll(async () => {
    fake = await FakeOpenAI.start();
    client = new OpenAI({ apiKey: 'sk-test-key', baseURL: fake.url, maxRetries: 0 });
  });
  afterEach(() => fake.reset());
  afterAll(() => fake.close());

  it('answers a completion in OpenAI’s format, echoing the last user message as JSON', async () => {
    expect(fake.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const completion = await client.chat.completions.create(ask('hello there'));
    expect(completion).toMatchObject({
      object: 'chat.completion',
      model: 'gpt-test',
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant' } }],
    });
    expect(JSON.parse(completion.choices[0].message.content!)).toEqual({
      text: 'echo: hello there',
      emotion: 'joy',
      intensity: 0.6,
    });
    const { prompt_tokens, completion_tokens, total_tokens } = completion.usage!;
    expect(prompt_tokens).toBeGreaterThan(0);
    expect(total_tokens).toBe(prompt_tokens + completion_tokens);

    const sent = fake.lastRequest();
    expect(sent).toMatchObject({
      method: 'POST',
      path: '/v1/chat/completions',
      authorization: 'Bearer sk-test-key',
      retryCount: 0,
      aborted: false,
    });
    expect(sent.body).toMatchObject({ model: 'gpt-test', response_format: responseFormat });
    expect(sent.body?.messages?.map((m) => m.role)).toEqual(['system', 'user']);
  });

  it('streams chunks, the usage chunk when asked, then [DONE]', async () => {
    fake.respondWith({ usage: { prompt_tokens: 11, completion_tokens: 7 } });
    const stream = await client.chat.completions.create({
      ...ask('stream me'),
      stream: true,
      stream_options: { include_usage: true },
    });
    const pieces: string[] = [];
    const finishes: Array<string | null> = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      for (const choice of chunk.choices) {
        if (choice.delta.content) pieces.push(choice.delta.content);
        finishes.push(choice.finish_reason);
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(pieces.length).toBeGreaterThan(2);
    expect(JSON.parse(pieces.join(''))).toMatchObject({ text: 'echo: stream me' });
    expect(finishes.at(-1)).toBe('stop');
    expect(finishes.slice(0, -1).every((finish) => finish === null)).toBe(true);
    expect(usage).toEqual({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
    expect(fake.lastRequest().body).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  it('follows its script: the queue in order, then the standing reply, then the default', async () => {
    fake.respondWith(
      { content: 'Just plain words, no JSON.' },
      { content: { text: 'hm', emotion: 'ennui', intensity: 0.4 } },
      { content: '{"text": "cut off' },
    );
    fake.respondAlwaysWith({ content: (request) => `always: ${request.body?.model}` });
    const contents: Array<string | null> = [];
    for (let i = 0; i < 4; i++) {
      contents.push(
        (await client.chat.completions.create(ask(`m${i}`))).choices[0].message.content,
      );
    }
    expect(contents).toEqual([
      'Just plain words, no JSON.',
      '{"text":"hm","emotion":"ennui","intensity":0.4}',
      '{"text": "cut off',
      'always: gpt-test',
    ]);
    fake.reset();
    const fresh = await client.chat.completions.create(ask('after reset'));
    expect(fresh.choices[0].message.content).toContain('echo: after reset');
    expect(fake.requests).toHaveLength(1);
  });

  it('answers errors with OpenAI’s body; the SDK retries a 500 (each attempt recorded)', async () => {
    const retrying = new OpenAI({ apiKey: 'sk-test-key', baseURL: fake.url, maxRetries: 2 });
    fake.respondAlwaysWith({ error: { status: 500 } });
    const failure = await retrying.chat.completions.create(ask('fail')).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect(failure).toMatchObject({ status: 500, type: 'server_error' });
    expect(fake.requests.map((request) => request.retryCount)).toEqual([0, 1, 2]);

    fake.reset();
    fake.respondWith({ error: { status: 429 } }, { error: { status: 500 } });
    await expect(client.chat.completions.create(ask('limited'))).rejects.toMatchObject({
      status: 429,
      code: 'rate_limit_exceeded',
    });
    await expect(client.chat.completions.create(ask('broken'))).rejects.toBeInstanceOf(
      OpenAI.InternalServerError,
    );
    expect(fake.requests).toHaveLength(2);
  });

  it('notices a client that aborts a stalled stream', async () => {
    fake.respondWith({ stream: { chunkSize: 4, stallAfter: 2 } });
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { ...ask('stall'), stream: true },
      { signal: controller.signal },
    );
    const pieces: string[] = [];
    for await (const chunk of stream) {
      const content = chunk.choices[0]?.delta.content;
      if (content) pieces.push(content);
      if (pieces.length === 2) controller.abort();
    }
    expect(pieces).toEqual(['{"te', 'xt":']);
    await fake.waitForAborted(1);
    expect(fake.aborted).toBe(1);
    expect(fake.lastRequest().aborted).toBe(true);
  });

  it('can hang (the SDK times out and the fake counts it aborted) or answer late', async () => {
    fake.respondWith({ hang: true }, { delayMs: 150 });
    // Outside Jest this is its subclass APIConnectionTimeoutError; inside, the SDK cannot recognise
    // the fetch AbortError from another realm and reports a plain connection error.
    await expect(
      client.chat.completions.create(ask('hang'), { timeout: 200 }),
    ).rejects.toBeInstanceOf(OpenAI.APIConnectionError);
    await fake.waitForAborted(1);

    const started = Date.now();
    await client.chat.completions.create(ask('late'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('fails a stream mid-way: a dropped connection, or an error event', async () => {
    fake.respondWith({ stream: { dropAfter: 1 } }, { stream: { errorAfter: 1 } });
    const read = async () => {
      const stream = await client.chat.completions.create({ ...ask('mid-way'), stream: true });
      for await (const chunk of stream) void chunk;
    };
    await expect(read()).rejects.toThrow();
    await expect(read()).rejects.toBeInstanceOf(OpenAI.APIError);
    expect(fake.aborted).toBe(0);
  });

  it('answers garbage with a 200, headers and then nothing, or a reset before any header', async () => {
    fake.respondWith(
      { raw: { body: '<html>upstream gateway</html>' } },
      { raw: { contentType: 'text/plain', body: 'not a completion' } },
      { hangAfterHeaders: true },
      { reset: true },
    );
    // fetch's SyntaxError, of another realm under Jest: told by its name.
    await expect(client.chat.completions.create(ask('garbage'))).rejects.toMatchObject({
      name: 'SyntaxError',
    });
    // Not JSON by its type: the SDK hands back the text, which has no choices.
    expect(await client.chat.completions.create(ask('text'))).toBe('not a completion');
    // The SDK's own timeout ends with the headers: only an abort signal cuts the body's wait.
    await expect(
      client.chat.completions.create(ask('headers only'), { signal: AbortSignal.timeout(300) }),
    ).rejects.toThrow();
    await fake.waitForAborted(1);
    await expect(client.chat.completions.create(ask('reset'))).rejects.toBeInstanceOf(
      OpenAI.APIConnectionError,
    );
  });

  it('sends retry-after as servers other than OpenAI do, and picks a reply per request', async () => {
    fake.respondWith({ error: { status: 429, retryAfter: '3600' } });
    const refused = await client.chat.completions.create(ask('busy')).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    const { headers } = refused as InstanceType<typeof OpenAI.RateLimitError>;
    expect(headers.get('retry-after')).toBe('3600');
    expect(headers.get('retry-after-ms')).toBeNull();

    let calls = 0;
    fake.respondAlwaysWith(() => (++calls % 2 === 0 ? { error: { status: 500 } } : {}));
    await expect(client.chat.completions.create(ask('one'))).resolves.toBeDefined();
    await expect(client.chat.completions.create(ask('two'))).rejects.toMatchObject({
      status: 500,
    });
  });

  it('paces a stream: M chunks, one every N ms, for benchmarks', async () => {
    fake.respondWith({ content: 'x'.repeat(50), stream: { chunks: 5, intervalMs: 30 } });
    const started = Date.now();
    const stream = await client.chat.completions.create({ ...ask('paced'), stream: true });
    const pieces: string[] = [];
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) pieces.push(chunk.choices[0].delta.content);
    }
    expect(pieces).toEqual(Array(5).fill('x'.repeat(10)));
    expect(Date.now() - started).toBeGreaterThanOrEqual(4 * 30 - 10);
  });

  it('accepts a base URL without /v1, refuses unknown paths and, when told to, wrong keys', async () => {
    const bare = new OpenAI({
      apiKey: 'sk-test-key',
      baseURL: fake.url.replace(/\/v1$/, ''),
      maxRetries: 0,
    });
    await bare.chat.completions.create(ask('bare'));
    expect(fake.lastRequest().path).toBe('/chat/completions');
    await expect(bare.models.list()).rejects.toMatchObject({ status: 404, code: 'unknown_url' });

    const guarded = await FakeOpenAI.start({ apiKey: 'sk-right' });
    try {
      const wrong = new OpenAI({ apiKey: 'sk-wrong', baseURL: guarded.url, maxRetries: 0 });
      await expect(wrong.chat.completions.create(ask('who'))).rejects.toBeInstanceOf(
        OpenAI.AuthenticationError,
      );
      const right = new OpenAI({ apiKey: 'sk-right', baseURL: guarded.url, maxRetries: 0 });
      await expect(right.chat.completions.create(ask('me'))).resolves.toBeDefined();
    } finally {
      await guarded.close();
    }
  });
});
