import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compareVersions, readVocabularyFiles } from './vocabulary-files';

describe('readVocabularyFiles', () => {
  it('reads the shipped versions oldest first, each changelog matching its contents', () => {
    const files = readVocabularyFiles();
    expect(files.map((file) => file.version)).toEqual(['1.0.0', '1.1.0', '1.2.0', '2.0.0']);
    expect(files[0].emotions).toHaveLength(8);
    expect(files[3].emotions).toHaveLength(28);
    for (const file of files) {
      for (const emotion of file.emotions) {
        expect(emotion.description.length).toBeGreaterThan(10);
        expect(emotion.arousal).toBeGreaterThanOrEqual(0);
        expect(emotion.arousal).toBeLessThanOrEqual(1);
      }
    }
  });

  it('refuses a version whose "added" does not match the difference from the previous one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vocab-'));
    const emotion = (name: string) => ({
      name,
      description: 'd',
      valence: 'neutral',
      arousal: 0,
      cues: [],
    });
    const version = (v: string, names: string[], added: string[]) => ({
      version: v,
      published_at: '2025-01-01T00:00:00.000Z',
      summary: 's',
      added,
      removed: [],
      emotions: names.map(emotion),
    });
    writeFileSync(join(dir, 'emotions-1.0.0.json'), JSON.stringify(version('1.0.0', ['a'], ['a'])));
    writeFileSync(
      join(dir, 'emotions-1.1.0.json'),
      JSON.stringify(version('1.1.0', ['a', 'b'], [])),
    );
    expect(() => readVocabularyFiles(dir)).toThrow('Vocabulary 1.1.0: "added" should be ["b"]');
  });

  it('orders versions numerically, not as text', () => {
    expect(['1.10.0', '1.2.0', '2.0.0', '1.2.10'].sort(compareVersions)).toEqual([
      '1.2.0',
      '1.2.10',
      '1.10.0',
      '2.0.0',
    ]);
  });
});
