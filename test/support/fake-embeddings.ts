import { createHash } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { random } from '../../bench/scenarios/support/chat-text';

/** The dimensions of the fake's vectors: enough that unrelated concepts stay near orthogonal. */
export const FAKE_DIMENSIONS = 256;

/**
 * EMBEDDINGS_MIN_SIMILARITY for this embedder. Its cosine of a question of k concepts with a text
 * of n is about shared / √(k·n): a three-concept question meets a knowledge chunk of 1,000
 * characters (70 or so concepts) that answers it at about 0.2, where a real model gives 0.4 to
 * 0.6 and the default floor (0.3) is set for those. The floor is the model's, as an operator sets it.
 */
export const FAKE_MIN_SIMILARITY = 0.15;

/**
 * Words that mean the same thing to the fake embedder, by concept. Everything else is a concept
 * of its own (its lower-cased word), and stop words are nothing.
 */
const SYNONYMS: Record<string, readonly string[]> = {
  travel: [
    'holiday',
    'holidays',
    'vacation',
    'trip',
    'travel',
    'journey',
    'crete',
    'island',
    'beach',
    'abroad',
    'overseas',
    'urlaub',
    'reise',
    'destination',
    'urlaubsziel',
    'winterurlaub',
  ],
  pet: [
    'dog',
    'puppy',
    'pet',
    'greyhound',
    'cat',
    'kitten',
    'hund',
    'kitty',
    'pets',
    'animal',
    'animals',
    'dackel',
    'haustier',
    'katze',
    'tier',
  ],
  work: [
    'job',
    'work',
    'career',
    'office',
    'employer',
    'colleague',
    'colleagues',
    'arbeit',
    'employed',
    'profession',
    'professionally',
    'wages',
    'earn',
    'arbeite',
    'arbeitet',
    'beruf',
    'beruflich',
  ],
  music: [
    'music',
    'band',
    'song',
    'songs',
    'concert',
    'guitar',
    'gig',
    'musician',
    'musicians',
    'musical',
    'instrument',
    'violin',
    'piano',
    'klavier',
    'musikalisch',
  ],
  food: [
    'food',
    'dish',
    'meal',
    'pasta',
    'cook',
    'cooking',
    'dinner',
    'eat',
    'eating',
    'lasagne',
    'essen',
    'esse',
    'gericht',
    'lieblingsessen',
    'käsespätzle',
  ],
  family: [
    'sister',
    'brother',
    'mother',
    'father',
    'mum',
    'dad',
    'family',
    'sibling',
    'siblings',
    'daughter',
    'son',
    'grandmother',
    'grandma',
    'relative',
    'relatives',
    'schwester',
    'bruder',
    'geschwister',
    'geschwisters',
    'tochter',
    'nachwuchs',
    'oma',
  ],
  // Groups below were added with test/fixtures/recall: words a real embedding model puts near
  // each other, in English and German, so that paraphrases meet their statements.
  name: ['name', 'named', 'call', 'called', 'heißt', 'heiße', 'vorname', 'lautet'],
  adoption: ['adopt', 'adopted', 'rescue', 'rescued', 'adoptiert', 'tierheim'],
  evening: ['night', 'nights', 'evening', 'evenings', 'abend', 'nacht'],
  allergy: ['allergic', 'allergy', 'reaction', 'allergisch', 'vertrage'],
  nut: ['nut', 'nuts', 'peanut', 'peanuts', 'erdnüsse', 'nüsse'],
  favourite: ['favourite', 'favorite', 'fan', 'love', 'adore', 'mag'],
  origin: [
    'grew',
    'raised',
    'hometown',
    'aufgewachsen',
    'ursprünglich',
    'heimat',
    'originate',
    'origin',
    'come',
    'comes',
  ],
  settlement: ['town', 'village', 'city', 'dorf', 'stadt', 'region', 'gegend'],
  coast: ['sea', 'seaside', 'coast', 'coastal', 'fishing', 'meer', 'küste'],
  running: ['marathon', 'race', 'run', 'running', 'jog', 'jogging', 'lauf', 'laufen'],
  preparing: ['training', 'train', 'prepare', 'preparing', 'trainiere', 'bereite'],
  car: ['car', 'cars', 'vehicle', 'drive', 'driving', 'auto', 'wagen'],
  language: ['language', 'languages', 'japanese', 'spanish', 'spanisch', 'fremdsprache', 'sprache'],
  study: [
    'learn',
    'learning',
    'study',
    'studying',
    'studied',
    'lessons',
    'major',
    'lerne',
    'lernt',
    'studiere',
    'übt',
  ],
  friend: ['friend', 'friends', 'mate', 'buddy', 'pal', 'freund', 'kumpel'],
  moving: ['move', 'moved', 'relocate', 'relocated', 'emigrated', 'gezogen', 'ausgewandert'],
  country: ['country', 'canada', 'iceland', 'land', 'kanada'],
  diet: ['vegetarian', 'veggie', 'vegan', 'meat', 'fleisch', 'vegetarier'],
  teaching: ['teach', 'taught', 'show', 'showed'],
  baking: ['bake', 'baking', 'bread', 'loaf', 'loaves', 'bakery'],
  fear: ['fear', 'afraid', 'scare', 'scared', 'terrified', 'frightened', 'angst', 'fürchte'],
  insect: ['spider', 'spiders', 'insects', 'bugs', 'crawlies', 'spinnen', 'krabbeltiere'],
  birthday: ['birthday', 'born', 'birth', 'geburtstag', 'geboren'],
  date: ['date', 'month', 'march', 'june', 'september', 'oktober', 'datum'],
  sport: ['sport', 'sports', 'football', 'soccer', 'team', 'game', 'fußball', 'verein'],
  week: [
    'week',
    'weekly',
    'weekend',
    'weekends',
    'thursday',
    'saturday',
    'sunday',
    'sundays',
    'dienstag',
    'woche',
  ],
  partner: [
    'partner',
    'spouse',
    'husband',
    'wife',
    'boyfriend',
    'girlfriend',
    'frau',
    'ehepartnerin',
  ],
  medical: [
    'nurse',
    'hospital',
    'healthcare',
    'doctor',
    'medical',
    'krankenpfleger',
    'notaufnahme',
    'krankenhaus',
  ],
  home: ['flat', 'apartment', 'house', 'wohnung'],
  below: ['above', 'below', 'beneath', 'underneath'],
  laundry: ['laundrette', 'laundromat', 'laundry'],
  age: ['old', 'age', 'aged', 'elderly'],
  drink: ['drink', 'coffee', 'espresso', 'tea', 'teas', 'leaves', 'latte', 'kaffee', 'trinke'],
  injury: [
    'broke',
    'broken',
    'fracture',
    'fractured',
    'injury',
    'injured',
    'gebrochen',
    'verletzung',
    'smashed',
    'damaged',
    'cracked',
  ],
  limb: ['wrist', 'arm', 'leg', 'bein'],
  youth: ['young', 'kid', 'child', 'childhood', 'teenager', 'teen', 'jugend'],
  shop: ['shop', 'store', 'bookshop', 'café', 'cafe', 'lokal'],
  dream: ['dream', 'dreams', 'hope', 'wish', 'ambition', 'traum', 'wünsche'],
  school: ['school', 'college', 'university', 'uni', 'grundschule', 'universität'],
  wedding: ['wedding', 'married', 'marry', 'marriage', 'hochzeit', 'heiraten'],
  money: ['money', 'cash', 'saving', 'save', 'savings', 'budget', 'spare', 'ersparten'],
  sobriety: ['sober', 'sobriety', 'alcohol', 'quit', 'drinking'],
  handedness: ['left', 'handed', 'lefty', 'southpaw'],
  volunteering: ['volunteer', 'volunteering', 'help', 'charity'],
  first: ['first', 'earliest'],
  skiing: ['ski', 'skiing', 'skifahren', 'piste', 'slope', 'slopes'],
  // Groups for the knowledge questions of test/fixtures/recall/knowledge-en.ts: a shop's words.
  festive: ['festive', 'christmas', 'xmas', 'easter', 'weihnachten'],
  opening: ['open', 'opens', 'opening', 'trading', 'closed', 'close', 'closes', 'geöffnet'],
  buying: [
    'buy',
    'buying',
    'bought',
    'purchase',
    'purchases',
    'order',
    'orders',
    'ordered',
    'seller',
    'sold',
    'sell',
    'kaufen',
  ],
  dispatch: [
    'post',
    'posted',
    'postage',
    'dispatch',
    'dispatched',
    'ship',
    'shipped',
    'shipping',
    'delivery',
    'delivered',
    'parcel',
    'versand',
  ],
  crockery: ['mug', 'mugs', 'cup', 'cups', 'teapot', 'teapots', 'tasse'],
  paying: ['pay', 'pays', 'paid', 'cover', 'covers', 'cost', 'costs', 'charge', 'fee', 'free'],
  membership: ['membership', 'member', 'members', 'join', 'joining', 'club', 'mitglied'],
  reward: ['treat', 'reward', 'rewards', 'points', 'voucher', 'bonus', 'perk', 'perks'],
  exchange: ['exchange', 'exchanged', 'swap', 'turn', 'convert', 'transferred', 'tauschen'],
  popular: ['best', 'most', 'popular', 'bestseller', 'beliebt'],
  packaging: ['packaging', 'packed', 'pack', 'package', 'pouch', 'pouches', 'verpackung'],
  eco: ['eco', 'organic', 'compostable', 'recycled', 'recycle', 'sustainable', 'environment'],
};

const STOP_WORDS = new Set([
  ...'a an and are as at be did do does for from go had has have how i in is it me my of on or our so that the they this to was we went were what when where which who why with you your'.split(
    ' ',
  ),
  // German function words (none that is also an English word: 'die', 'am', 'war' stay words).
  ...'aus bin bist das dem den der des du ein eine einem einen einer er für habe ich ihr im ist mein meine meinem meinen meiner meines mich mir noch sie sind und vor wann was welche welchem welchen welcher welches wer wie wo wurde zu'.split(
    ' ',
  ),
]);

const CONCEPT_OF = new Map<string, string>(
  Object.entries(SYNONYMS).flatMap(([concept, words]) => words.map((word) => [word, concept])),
);

const conceptVectors = new Map<string, Float64Array>();

/**
 * A concept's vector: dense, every component +1 or -1 from a generator seeded by a hash of the
 * concept's name. Two concepts' vectors are nearly orthogonal (their cosine about 0 ± 1/√d), and
 * every component carries a sign, as a real model's do: the service's sign sketches
 * (docs/memory.md, "The bound") see what they would see of a real embedding.
 */
function conceptVector(concept: string, dimensions: number): Float64Array {
  const key = `${dimensions}:${concept}`;
  let vector = conceptVectors.get(key);
  if (!vector) {
    const next = random(createHash('sha256').update(concept).digest().readUInt32BE(0));
    vector = new Float64Array(dimensions);
    // The sign from the lowest bit of each 32-bit draw.
    for (let i = 0; i < dimensions; i++) vector[i] = (next() * 2 ** 32) & 1 ? 1 : -1;
    conceptVectors.set(key, vector);
  }
  return vector;
}

/**
 * A deterministic embedder: the vector is the sum of its words' concept vectors. Texts sharing a
 * concept have a clearly positive cosine, others about 0; "Where did I go on holiday?" and "We
 * spent two weeks in Crete" share none of their words and meet at 'travel'.
 */
export function fakeEmbedding(text: string, dimensions = FAKE_DIMENSIONS): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  for (const word of text.toLowerCase().match(/\p{L}+/gu) ?? []) {
    if (STOP_WORDS.has(word)) continue;
    const concept = conceptVector(CONCEPT_OF.get(word) ?? word, dimensions);
    for (let i = 0; i < dimensions; i++) vector[i] += concept[i];
  }
  return vector;
}

export interface RecordedEmbeddingsRequest {
  path: string;
  authorization: string | undefined;
  model: string | undefined;
  /** The `dimensions` asked for, if any (the vectors then have that many). */
  dimensions: number | undefined;
  input: string[];
  /** The answer's status: 200, or the failure the fake was told to give. */
  status: number;
}

/** What answers a request's texts: the vectors, in their order (`dimensions` if asked for). */
export type EmbedTexts = (input: string[], dimensions?: number) => Promise<number[][]>;

/**
 * An OpenAI-compatible `POST /v1/embeddings` on loopback for the specs (the `openai` SDK talks to
 * it through EMBEDDINGS_BASE_URL, `fake.url`). Answers with fakeEmbedding's vectors (or those of
 * the `embed` it is given: the bench's real model) in OpenAI's wire format, records every
 * request, and on demand fails (an HTTP status with OpenAI's error body) or answers late.
 */
export class FakeEmbeddings {
  readonly requests: RecordedEmbeddingsRequest[] = [];
  /** Answer every request with this status until `recover()`; null: answer. */
  private failure: number | null = null;
  private delayMs = 0;
  /** A request holding a text with this in it is refused (400, as a too-long input is). */
  private refused: { marker: string; status: number } | null = null;
  /** Headers at once, the body this much later (0: at once). */
  private bodyDelayMs = 0;
  /** What each vector's `index` is answered as (null: its own). */
  private indexOf: ((index: number) => unknown) | null = null;
  /** The dimensions answered whatever a request asks (null: those asked). */
  private dimensionsAnswered: number | null = null;
  private server: Server | undefined;
  private port = 0;

  constructor(
    private readonly embed: EmbedTexts = (input, dimensions) =>
      Promise.resolve(input.map((text) => fakeEmbedding(text, dimensions))),
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** Every text sent, in order, across requests. */
  get inputs(): string[] {
    return this.requests.flatMap((request) => request.input);
  }

  failWith(status: number): void {
    this.failure = status;
  }

  /** Refuses (400, or `status`) every request holding a text that contains `marker`; null: none. */
  refuse(marker: string | null, status = 400): void {
    this.refused = marker === null ? null : { marker, status };
  }

  /** Answers after `ms` (0: at once). */
  delay(ms: number): void {
    this.delayMs = ms;
  }

  /** Sends the headers at once and the body `ms` later, as a stalled proxy does (0: at once). */
  delayBody(ms: number): void {
    this.bodyDelayMs = ms;
  }

  /** Answers each vector's `index` as `indexOf` gives it, as a buggy server does (null: its own). */
  answerIndexes(indexOf: ((index: number) => unknown) | null): void {
    this.indexOf = indexOf;
  }

  /** Answers vectors of `dimensions` whatever a request asks, as a provider ignoring it does (null: those asked). */
  answerDimensions(dimensions: number | null): void {
    this.dimensionsAnswered = dimensions;
  }

  recover(): void {
    this.dimensionsAnswered = null;
    this.failure = null;
    this.delayMs = 0;
    this.bodyDelayMs = 0;
    this.indexOf = null;
  }

  async start(): Promise<void> {
    this.server = createServer((request, response) => void this.handle(request, response));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const path = (request.url ?? '').split('?')[0];
    if (request.method !== 'POST' || !/^(\/v1)?\/embeddings$/.test(path)) {
      return this.send(response, 404, {
        error: { message: 'Not found', type: 'invalid_request_error' },
      });
    }
    let body: { model?: string; input?: unknown; dimensions?: number };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
    } catch {
      return this.send(response, 400, {
        error: { message: 'Body is not JSON', type: 'invalid_request_error' },
      });
    }
    const input =
      typeof body.input === 'string'
        ? [body.input]
        : Array.isArray(body.input)
          ? body.input.map(String)
          : [];
    const refused = this.refused;
    const status =
      this.failure ??
      (refused && input.some((text) => text.includes(refused.marker)) ? refused.status : 200);
    this.requests.push({
      path,
      authorization: request.headers.authorization,
      model: body.model,
      dimensions: body.dimensions,
      input,
      status,
    });
    if (this.delayMs > 0) {
      await later(this.delayMs);
      if (response.destroyed) return;
    }
    if (status !== 200) {
      return this.send(response, status, {
        error: {
          message: `The fake was told to fail with ${status}`,
          type: 'server_error',
          code: null,
        },
      });
    }
    const vectors = await this.embed(input, this.dimensionsAnswered ?? body.dimensions);
    const indexOf = this.indexOf ?? ((index: number) => index);
    if (this.bodyDelayMs > 0) {
      response.writeHead(200, { 'content-type': 'application/json' }).flushHeaders();
      await later(this.bodyDelayMs);
    }
    this.send(response, 200, {
      object: 'list',
      model: body.model,
      data: vectors.map((embedding, index) => ({
        object: 'embedding',
        index: indexOf(index),
        embedding,
      })),
      usage: { prompt_tokens: input.length, total_tokens: input.length },
    });
  }

  private send(response: ServerResponse, status: number, body: unknown): void {
    if (response.destroyed) return;
    if (!response.headersSent) response.writeHead(status, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  }
}

/** Resolves in `ms`, without keeping the process alive for it (a spec may end first). */
function later(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
