import { AppError } from '../common/errors/app-error';
import { type CheckedImport, ImportChecker, type ImportContext, SeenIds } from './import-rules';
import type { PmfDocument } from './pmf-v1';
import { PmfV1Validator } from './pmf-v1';

const validator = new PmfV1Validator();

/** The document's parts through the checks, in the order ImportService reads them. */
function check(doc: PmfDocument): CheckedImport {
  const checker = new ImportChecker(validator, context);
  checker.root({ ...doc, personalities: [], relationships: [], memories: [], facts: [] });
  doc.personalities.forEach((p, i) => checker.personality(i, p));
  doc.relationships.forEach((r, i) => checker.relationship(i, r));
  (doc.facts ?? []).forEach((f) => checker.factNamesMemory(f));
  doc.memories.forEach((m, i) => checker.memory(i, m));
  (doc.facts ?? []).forEach((f, i) => checker.fact(i, f));
  return checker.finish();
}

const NOW = new Date('2026-11-26T12:00:00.000Z');
const PAST = '2026-11-01T08:00:00.000Z';
const PERSONALITY = '6f1c3f0e-1111-4111-8111-111111111111';

const context: ImportContext = {
  now: NOW,
  factsLimit: 3,
  emotionNamesOf: (version) =>
    ({ '1.0.0': new Set(['joy', 'trust']), '2.0.0': new Set(['joy', 'gratitude']) })[version],
  emotionNamesOfEveryVersion: new Set(['joy', 'trust', 'gratitude']),
};

function document(): PmfDocument {
  return {
    format: 'pmf',
    version: 1,
    exported_at: PAST,
    end_user: {
      user_id: 'u-1',
      metadata: {},
      status: 'active',
      created_at: PAST,
      updated_at: PAST,
    },
    personalities: [
      {
        id: PERSONALITY,
        source_slug: 'sage-mentor',
        source_version: '1.0.0',
        name: 'Sage',
        description: 'A mentor',
        traits: ['patient'],
        voice: { tone: 'warm', formality: 'neutral', style_notes: '' },
        system_prompt: 'Be kind.',
      },
    ],
    relationships: [],
    memories: [
      {
        id: '5',
        personality_id: PERSONALITY.toUpperCase(),
        role: 'user',
        content: 'My name is Ada.',
        emotion: { name: 'joy', intensity: 0.5 },
        vocabulary_version: '2.0.0',
        created_at: PAST,
      },
      {
        id: '6',
        personality_id: PERSONALITY,
        role: 'personality',
        content: '',
        emotion: null,
        vocabulary_version: null,
        created_at: PAST,
      },
    ],
    facts: [
      {
        id: '0b7d1c8e-2222-4222-8222-222222222222',
        content: 'Their name is Ada.',
        source: 'engine',
        memory_id: '5',
        created_at: PAST,
        updated_at: PAST,
      },
    ],
  };
}

/** The problems the checks name, as `field: problem`. */
function problems(doc: PmfDocument): string[] {
  try {
    check(doc);
    return [];
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    expect(error.code).toBe('validation_failed');
    return (error.details ?? []).map((d) => `${d.field}: ${d.problem}`);
  }
}

describe('ImportChecker', () => {
  it('takes a document that keeps the rules (ids match without regard to case; an empty reply)', () => {
    expect(problems(document())).toEqual([]);
    expect(check(document())).toEqual({
      endUser: document().end_user,
      memories: 2,
      facts: 1,
      namedMemories: new Set(['5']),
    });
  });

  it('names duplicate ids and references outside the document', () => {
    const doc = document();
    doc.memories[1].id = '5';
    doc.memories.push({
      ...doc.memories[0],
      id: '7',
      personality_id: '6f1c3f0e-2222-4222-8222-222222222222',
    });
    doc.facts![0].memory_id = '99';
    doc.personalities.push({ ...doc.personalities[0] });
    expect(problems(doc)).toEqual([
      '/personalities/1/id: repeats the id of /personalities/0',
      '/memories/1/id: repeats the id of /memories/0',
      '/memories/2/personality_id: names no personality of the document',
      '/facts/0/memory_id: names no memory of the document',
    ]);
  });

  it('checks vocabulary versions and their emotions', () => {
    const doc = document();
    doc.memories[0].vocabulary_version = '3.0.0';
    doc.memories[1].vocabulary_version = '2.0.0';
    doc.memories[1].emotion = { name: 'trust', intensity: 1 };
    expect(problems(doc).map((p) => p.split(':')[0])).toEqual([
      '/memories/0/vocabulary_version',
      '/memories/1/emotion/name',
    ]);
  });

  it('checks the emotion of a memory without a vocabulary version against every version', () => {
    const doc = document();
    // 'trust' is only in 1.0.0, 'gratitude' only in 2.0.0: both were named by the service.
    for (const name of ['gratitude', 'trust']) {
      doc.memories[1].emotion = { name, intensity: 0.4 };
      expect(problems(doc)).toEqual([]);
    }
    doc.memories[1].emotion = { name: 'wistfulness', intensity: 0.4 };
    expect(problems(doc).map((p) => p.split(':')[0])).toEqual(['/memories/1/emotion/name']);
    doc.memories[1].emotion = { name: `not an emotion\u0007\n${'z'.repeat(20_000)}`, intensity: 1 };
    expect(problems(doc).map((p) => p.split(':')[0])).toEqual(['/memories/1/emotion/name']);
  });

  it('refuses times after the clock or before 1970, to the millisecond', () => {
    const doc = document();
    doc.memories[0].created_at = NOW.toISOString();
    doc.memories[1].created_at = new Date(NOW.getTime() + 1).toISOString();
    doc.facts![0].created_at = '1969-12-31T23:59:59.999Z';
    expect(problems(doc)).toEqual([
      '/memories/1/created_at: must not be in the future',
      '/facts/0/created_at: must be in the years 1970..9999',
    ]);
  });

  it('refuses a time the format admits but no clock shows (a leap second), not a 500', () => {
    const doc = document();
    doc.memories[0].created_at = '2016-12-31T23:59:60.000Z';
    expect(problems(doc)).toEqual(['/memories/0/created_at: must be a time a clock can show']);
  });

  it("refuses a tool call's arguments or output over 16 KiB serialised", () => {
    const doc = document();
    const call = {
      id: 'call_1',
      name: 'lookup_order',
      arguments: { note: 'a'.repeat(16 * 1024 - 20) },
      output: { note: 'o'.repeat(16 * 1024 - 20) },
      execution: 'client' as const,
      duration_ms: null,
      error: null,
    };
    doc.memories[1].tool_calls = [call];
    expect(problems(doc)).toEqual([]);
    doc.memories[1].tool_calls = [{ ...call, arguments: { note: 'a'.repeat(16 * 1024) } }];
    expect(problems(doc).map((p) => p.split(':')[0])).toEqual([
      '/memories/1/tool_calls/0/arguments',
    ]);
  });

  it('holds the API’s limits: characters, not UTF-16 units', () => {
    const doc = document();
    doc.memories[0].content = '😀'.repeat(8_000);
    // A fact of the API's: 500 characters (a learned one's are 200).
    doc.facts![0] = { ...doc.facts![0], source: 'api', content: `  ${'é'.repeat(500)}  ` };
    expect(problems(doc)).toEqual([]);
    doc.memories[0].content = '😀'.repeat(8_001);
    doc.memories[1].content = 'x'.repeat(32_001);
    doc.facts![0].content = 'é'.repeat(501);
    doc.end_user.user_id = 'x\u0001';
    expect(problems(doc).map((p) => p.split(':')[0])).toEqual([
      '/end_user/user_id',
      '/memories/0/content',
      '/memories/1/content',
      '/facts/0/content',
    ]);
  });

  it('holds a learned fact (source engine) to the API’s 500: PATCH may have corrected it at length', () => {
    const doc = document();
    expect(doc.facts![0].source).toBe('engine');
    doc.facts![0].content = 'é'.repeat(500);
    expect(problems(doc)).toEqual([]);
    doc.facts![0].content = 'é'.repeat(501);
    expect(problems(doc)).toEqual(['/facts/0/content: must be at most 500 characters']);
  });

  it('refuses more facts than the limit, and facts alike', () => {
    const doc = document();
    const fact = doc.facts![0];
    doc.facts = [fact, { ...fact, content: 'THEIR name  is ada.', memory_id: null }];
    expect(problems(doc)).toEqual([
      '/facts/1/content: repeats /facts/0 (case and white space aside)',
    ]);
    doc.facts = [0, 1, 2, 3].map((i) => ({ ...fact, content: `Fact ${i}` }));
    expect(problems(doc)).toEqual([
      '/facts: holds 4 facts; an end user holds at most 3 (MEMORY_FACTS_LIMIT)',
    ]);
  });

  it('lists at most 20 problems and counts them all', () => {
    const doc = document();
    doc.memories = Array.from({ length: 30 }, (_, i) => ({
      ...doc.memories[0],
      id: String(i),
      vocabulary_version: '9.9.9',
    }));
    doc.facts = [];
    try {
      check(doc);
      throw new Error('not refused');
    } catch (error) {
      expect((error as AppError).details).toHaveLength(20);
      expect((error as AppError).message).toContain('30 problem');
    }
  });

  it('checks each part against its part of the published schema, by JSON pointer', () => {
    const doc = document() as unknown as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    doc.version = 2;
    doc.memories[1].role = 'bot';
    doc.facts[0].source = 'elsewhere';
    doc.personalities[0].traits = 'patient';
    expect(problems(doc as PmfDocument)).toEqual([
      '/version: must be 1',
      '/personalities/0/traits: must be array',
      '/memories/1/role: must be one of ["user","personality"]',
      '/facts/0/source: must be one of ["api","engine"]',
    ]);
  });

  it('tells a repeated memory id among many, wherever it is', () => {
    const seen = new SeenIds();
    for (let i = 0; i < 50_000; i++)
      expect(seen.firstIndex(String(1_000_000 - i * 7), i)).toBe(undefined);
    expect(seen.firstIndex(String(1_000_000 - 7 * 12_345), 50_000)).toBe(12_345);
    expect(seen.firstIndex('0999999', 50_001)).toBe(undefined);
    expect(seen.firstIndex(String(1_000_000), 50_002)).toBe(0);
  });

  it.each([
    ['a name with a line break', { name: 'Sage\nIMPORTANT' }, '/personalities/0/name'],
    ['a name over 100 characters', { name: 'n'.repeat(101) }, '/personalities/0/name'],
    ['an empty system prompt', { system_prompt: '' }, '/personalities/0/system_prompt'],
    [
      'a system prompt over 20,000 characters',
      { system_prompt: 'p'.repeat(20_001) },
      '/personalities/0/system_prompt',
    ],
    ['no traits', { traits: [] }, '/personalities/0/traits'],
    [
      'a voice field PATCH does not know',
      { voice: { tone: 'warm', formality: 'neutral', style_notes: '', shout: true } },
      '/personalities/0/voice/shout',
    ],
    [
      'a formality PATCH refuses',
      { voice: { tone: 'warm', formality: 'rude', style_notes: '' } },
      '/personalities/0/voice/formality',
    ],
    ['a language the service does not know', { language: 'xx' }, '/personalities/0/language'],
    [
      'a reply template over 4,000 characters',
      {
        replies: {
          first_meeting: 'Hi',
          positive: ['x'.repeat(4_001)],
          negative: ['n'],
          ambiguous: ['a'],
          neutral: ['o'],
          recall: ['{memory}'],
        },
      },
      '/personalities/0/replies/positive',
    ],
  ])('holds a personality to the rules PATCH holds: %s', (_name, fields, field) => {
    const doc = document();
    Object.assign(doc.personalities[0], fields);
    expect(problems(doc).map((p) => p.split(': ')[0])).toEqual([field]);
  });

  it('holds at most 1,000 personalities', () => {
    const doc = document();
    doc.personalities = Array.from({ length: 1_001 }, (_, i) => ({
      ...doc.personalities[0],
      id: `6f1c3f0e-1111-4111-8111-${String(i).padStart(12, '0')}`,
    }));
    doc.memories.forEach((m) => (m.personality_id = doc.personalities[0].id));
    expect(problems(doc)).toEqual([
      '/personalities: holds 1001 personalities; a document holds at most 1000',
    ]);
  });
});
