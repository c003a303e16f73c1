import { readCatalogFile, SHIPPED_CATALOG_PATH } from '../../personalities/catalog-file';
import type { EmotionVocabulary } from '../../vocabularies/entities/emotion-vocabulary.entity';
import { readVocabularyFiles } from '../../vocabularies/vocabulary-files';
import { detectEmotion, LocalResponseEngine } from './local-response-engine';

const latest = readVocabularyFiles().at(-1)!;
const vocabulary = { version: latest.version, emotions: latest.emotions } as EmotionVocabulary;
const sage = readCatalogFile(SHIPPED_CATALOG_PATH).find((entry) => entry.slug === 'sage-mentor')!;
const personality = { id: 'p1', name: sage.name, replies: sage.replies };

describe('detectEmotion', () => {
  it('finds the emotion whose cues appear, as whole words', () => {
    expect(detectEmotion('I am so happy today', latest.emotions).name).toBe('joy');
    expect(detectEmotion('thanks a lot', latest.emotions).name).toBe('gratitude');
    expect(detectEmotion('I feel so scared', latest.emotions).name).toBe('fear');
    // "sad" inside "Sadie" is not sadness.
    expect(detectEmotion('Sadie called', latest.emotions).name).toBe('neutral');
  });

  it('uses only the given vocabulary: emotions removed in 2.0.0 are not detected', () => {
    const v1 = readVocabularyFiles()[0];
    const trusting = 'I trust you completely';
    expect(detectEmotion(trusting, v1.emotions).name).toBe('trust');
    expect(latest.emotions.map((e) => e.name)).not.toContain('trust');
    expect(detectEmotion(trusting, latest.emotions).name).not.toBe('trust');
  });

  it('answers neutral at 0 without cues, and grows intensity with emphasis, within 0..1', () => {
    expect(detectEmotion('the meeting is at noon', latest.emotions)).toMatchObject({
      name: 'neutral',
      intensity: 0,
    });
    const calm = detectEmotion('I am happy', latest.emotions).intensity;
    const loud = detectEmotion(
      'I am SO SO HAPPY!!! really delighted!!!',
      latest.emotions,
    ).intensity;
    expect(loud).toBeGreaterThan(calm);
    expect(loud).toBeLessThanOrEqual(1);
    expect(calm).toBeGreaterThan(0);
  });
});

describe('LocalResponseEngine', () => {
  const engine = new LocalResponseEngine();

  it('greets on a first meeting and answers in the personality’s templates', async () => {
    const reply = await engine.reply({
      personality,
      message: 'I am so happy',
      memories: [],
      vocabulary,
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
    const request = { personality, message: 'thank you', memories, vocabulary };
    const reply = await engine.reply(request);
    expect(reply.text).toContain('my dog is ill');
    expect(reply.text).not.toContain(sage.replies.first_meeting);
    expect(await engine.reply(request)).toEqual(reply);
  });
});
