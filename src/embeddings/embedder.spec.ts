import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { APIError } from 'openai';
import pino from 'pino';
import { FakeEmbeddings } from '../../test/support/fake-embeddings';
import type { embeddingsConfig } from '../config/embeddings.config';
import type { engineConfig } from '../config/engine.config';
import type { Database } from '../database/database';
import { MetricsService } from '../metrics/metrics.service';
import {
  Embedder,
  inOrder,
  InvalidVectorError,
  isUnembeddable,
  MAX_DIMENSIONS,
  unitLength,
  wellFormed,
} from './embedder';

const ORGANIZATION_A = '00000000-0000-4000-8000-00000000000a';
const ORGANIZATION_B = '00000000-0000-4000-8000-00000000000b';

describe('unitLength (a provider vector as the service stores it)', () => {
  it('scales to unit length', () => {
    expect(unitLength([3, 4])).toEqual([0.6, 0.8]);
  });

  it("gives 0 for a component too small for PostgreSQL's real, which would refuse the statement", () => {
    const [large, tiny] = unitLength([1, 1e-46]);
    expect(large).toBe(1);
    expect(tiny).toBe(0);
  });

  it('scales very large and very small vectors without overflow or underflow', () => {
    expect(unitLength([1e200, -1e200])[0]).toBeCloseTo(Math.SQRT1_2, 12);
    expect(unitLength([3e-200, 4e-200])).toEqual([0.6, 0.8]);
  });

  it('is unembeddable, as a refused text is: its item is skipped alone', () => {
    let thrown: unknown;
    try {
      unitLength([0, 0]);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(InvalidVectorError);
    expect(isUnembeddable(thrown)).toBe(true);
  });

  it.each([
    [400, true],
    [413, true],
    [422, true],
    // The key's, the account's, the model's or the provider's: retried, never a text skipped.
    [401, false],
    [402, false],
    [403, false],
    [404, false],
    [408, false],
    [429, false],
    [500, false],
    [503, false],
  ])('takes a provider status %d as a refused text: %s', (status, refused) => {
    expect(isUnembeddable(APIError.generate(status, { error: {} }, 'refused', new Headers()))).toBe(
      refused,
    );
  });

  it.each([
    ['not finite', [1, Number.NaN]],
    ['infinite', [Number.POSITIVE_INFINITY, 1]],
    ['empty', []],
    ['longer than MAX_DIMENSIONS', new Array<number>(MAX_DIMENSIONS + 1).fill(1)],
    ['not numbers', ['1', 2]],
    ['not an array', 'base64text'],
    ['all zeros', [0, 0, 0]],
  ])('refuses a vector that is %s', (_, vector) => {
    expect(() => unitLength(vector)).toThrow(InvalidVectorError);
  });

  it('takes MAX_DIMENSIONS', () => {
    expect(unitLength(new Array<number>(MAX_DIMENSIONS).fill(1))).toHaveLength(MAX_DIMENSIONS);
  });
});

describe("inOrder (the provider's answer: one vector per text)", () => {
  const item = (index: unknown, embedding: number[] = [1, 0]) =>
    ({ index, embedding }) as { index: number; embedding: number[] };

  it('puts each vector at its index, whatever order they come in', () => {
    expect(inOrder([item(1, [0, 2]), item(0, [3, 0])], 2)).toEqual([
      [1, 0],
      [0, 1],
    ]);
  });

  it.each([
    ['a repeated index', [item(0), item(0)]],
    ['an index past the texts', [item(0), item(7)]],
    ['a negative index', [item(-1), item(0)]],
    ['an index that is not an integer', [item(0), item('1')]],
    ['a missing index', [item(0), item(undefined)]],
    ['one vector short', [item(0)]],
    ['one vector too many', [item(0), item(1), item(2)]],
  ])('refuses %s, as an unusable vector (no hole passes for one)', (_, data) => {
    expect(() => inOrder(data, 2)).toThrow(InvalidVectorError);
  });
});

describe('wellFormed (what is sent to the provider)', () => {
  it('replaces a lone surrogate, as one cut from its pair leaves, by U+FFFD', () => {
    const emoji = '\u{1F600}';
    expect(wellFormed(`ab${emoji.slice(0, 1)}`)).toBe('ab\uFFFD');
    expect(wellFormed(`\uDE00x`)).toBe('\uFFFDx');
    expect(wellFormed(`a${emoji}b`)).toBe(`a${emoji}b`);
  });
});

describe('Embedder.embedQuery (a question asked twice at once)', () => {
  const fake = new FakeEmbeddings();
  let embedder: Embedder;

  beforeAll(async () => {
    await fake.start();
    fake.delay(50);
    const logger = new PinoLogger({ pinoHttp: pino({ level: 'silent' }) });
    embedder = new Embedder(
      {
        model: 'fake-embedder',
        baseUrl: fake.url,
        apiKey: 'test',
        queryTimeoutMs: 2_000,
        candidates: 100,
        minSimilarity: 0.15,
      } as ConfigType<typeof embeddingsConfig>,
      {} as ConfigType<typeof engineConfig>,
      logger,
      new MetricsService(
        { metricsPort: 0, metricsHost: undefined, tracing: false },
        {} as Database,
        logger,
        'server',
      ),
      {} as Database,
    );
  });
  afterAll(() => fake.stop());
  beforeEach(() => fake.requests.splice(0));

  it("shares one provider call within an organization (a reply's recall and retrieval)", async () => {
    const [first, second] = await Promise.all([
      embedder.embedQuery(ORGANIZATION_A, 'Where did I go on holiday?'),
      embedder.embedQuery(ORGANIZATION_A, 'Where did I go on holiday?'),
    ]);
    expect(fake.requests).toHaveLength(1);
    expect(second).toBe(first);
  });

  it('never shares one between organizations: neither learns what the other asks, nor fails with it', async () => {
    const [first, second] = await Promise.all([
      embedder.embedQuery(ORGANIZATION_A, 'Where did I go on holiday?'),
      embedder.embedQuery(ORGANIZATION_B, 'Where did I go on holiday?'),
    ]);
    expect(fake.requests).toHaveLength(2);
    expect(second).not.toBe(first);
    expect(second?.vector).toEqual(first?.vector);
  });
});
