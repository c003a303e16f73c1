import { AppError } from '../common/errors/app-error';
import { checkImport, type ImportContext } from './import-rules';
import type { PmfDocument } from './pmf-v1';
import { PmfV1Validator } from './pmf-v1';

const NOW = new Date('2026-11-26T12:00:00.000Z');
const PAST = '2026-11-01T08:00:00.000Z';
const PERSONALITY = '6f1c3f0e-1111-4111-8111-111111111111';

const context: ImportContext = {
  now: NOW,
  factsLimit: 3,
  emotionNamesOf: (version) =>
    ({ '1.0.0': new Set(['joy', 'trust']), '2.0.0': new Set(['joy', 'gratitude']) })[version],
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

/** The problems checkImport names, as `field: problem`. */
function problems(doc: PmfDocument): string[] {
  try {
    checkImport(doc, context);
    return [];
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    expect(error.code).toBe('validation_failed');
    return (error.details ?? []).map((d) => `${d.field}: ${d.problem}`);
  }
}

describe('checkImport', () => {
  it('takes a document that keeps the rules (ids match without regard to case; an empty reply)', () => {
    expect(problems(document())).toEqual([]);
    expect(new PmfV1Validator().parse(document())).toBeDefined();
  });

  it('names duplicate ids and references outside the document', () => {
    const doc = document();
    doc.memories[1].id = '5';
    doc.memories.push({ ...doc.memories[0], id: '7', personality_id: 'other' });
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

  it('holds the API’s limits: characters, not UTF-16 units', () => {
    const doc = document();
    doc.memories[0].content = '😀'.repeat(8_000);
    doc.facts![0].content = `  ${'é'.repeat(500)}  `;
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
      checkImport(doc, context);
      throw new Error('not refused');
    } catch (error) {
      expect((error as AppError).details).toHaveLength(20);
      expect((error as AppError).message).toContain('30 problem');
    }
  });
});
