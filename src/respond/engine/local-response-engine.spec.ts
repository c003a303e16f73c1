import { readCatalogFile, SHIPPED_CATALOG_PATH } from '../../personalities/catalog-file';
import type { EmotionVocabulary } from '../../vocabularies/entities/emotion-vocabulary.entity';
import { readVocabularyFiles } from '../../vocabularies/vocabulary-files';
import { LocalResponseEngine } from './local-response-engine';

const latest = readVocabularyFiles().at(-1)!;
const vocabulary = { version: latest.version, emotions: latest.emotions } as EmotionVocabulary;
const sage = readCatalogFile(SHIPPED_CATALOG_PATH).find((entry) => entry.slug === 'sage-mentor')!;
const personality = {
  id: 'p1',
  name: sage.name,
  description: sage.description,
  traits: sage.traits,
  voice: sage.voice,
  systemPrompt: sage.system_prompt,
  model: null,
  replies: sage.replies,
  language: 'en',
  searchConfig: 'english',
  tools: [],
};
const remembered = { facts: [] as string[], recalled: [], crisis: false };
const signal = new AbortController().signal;

describe('LocalResponseEngine', () => {
  const engine = new LocalResponseEngine();

  it('greets on a first meeting and answers in the personality’s templates', async () => {
    const reply = await engine.reply({
      personality,
      message: 'I am so happy',
      memories: [],
      ...remembered,
      vocabulary,
      signal,
    });
    expect(reply.text.startsWith(sage.replies.first_meeting)).toBe(true);
    expect(reply.text).toContain('joy');
    expect(reply.emotion.name).toBe('joy');
    expect(reply.emotion.intensity).toBeLessThan(reply.detected.intensity);
  });

  it('recalls the user’s latest earlier message and is deterministic', async () => {
    const memories = [
      { role: 'user' as const, content: 'my dog is ill', emotion: 'sadness' },
      { role: 'personality' as const, content: 'I am sorry', emotion: 'sadness' },
    ];
    const request = {
      personality,
      message: 'thank you',
      memories,
      ...remembered,
      vocabulary,
      signal,
    };
    const reply = await engine.reply(request);
    expect(reply.text).toContain('my dog is ill');
    expect(reply.text).not.toContain(sage.replies.first_meeting);
    expect(await engine.reply(request)).toEqual(reply);
  });

  it('quotes the most relevant recalled memory rather than the latest one, and learns facts', async () => {
    const memories = [{ role: 'user' as const, content: 'nice weather', emotion: null }];
    const recalled = [
      {
        role: 'user' as const,
        content: 'my dog Rex hates thunder',
        created_at: '2026-01-02T03:04:05.000Z',
      },
    ];
    const reply = await engine.reply({
      personality,
      message: 'My name is Ada. A storm is coming, Rex is hiding',
      memories,
      facts: [],
      recalled,
      crisis: false,
      vocabulary,
      signal,
    });
    expect(reply.text).toContain('my dog Rex hates thunder');
    expect(reply.text).not.toContain('nice weather');
    expect(reply.facts).toEqual(['Their name is Ada.']);
  });

  it('streams the reply in pieces that add up to it, and stops before starting once aborted', async () => {
    const pieces: string[] = [];
    const reply = await engine.reply({
      personality,
      message: 'I am so happy',
      memories: [],
      ...remembered,
      vocabulary,
      signal,
      onDelta: async (piece) => {
        pieces.push(piece);
      },
    });
    expect(pieces.length).toBeGreaterThan(3);
    expect(pieces.join('')).toBe(reply.text);
    const aborted = new AbortController();
    aborted.abort(new Error('client went away'));
    await expect(
      engine.reply({
        personality,
        message: 'hi',
        memories: [],
        ...remembered,
        vocabulary,
        signal: aborted.signal,
      }),
    ).rejects.toThrow('client went away');
  });
});
