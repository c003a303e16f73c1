import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EmotionDefinition } from './entities/emotion-vocabulary.entity';

export interface VocabularyFile {
  version: string;
  published_at: string;
  summary: string;
  added: string[];
  removed: string[];
  emotions: EmotionDefinition[];
}

export const VOCABULARY_DATA_DIR = join(__dirname, 'data');
const SEMVER = /^(\d+)\.(\d+)\.(\d+)$/;

export function parseSemver(version: string): [number, number, number] {
  const match = SEMVER.exec(version);
  if (!match) throw new Error(`"${version}" is not a MAJOR.MINOR.PATCH version`);
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

export function compareVersions(a: string, b: string): number {
  const [x, y] = [parseSemver(a), parseSemver(b)];
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
}

/**
 * Reads the published vocabularies shipped with the service (`data/emotions-<version>.json`),
 * oldest first, and refuses a set whose changelog does not match its contents: `added` and
 * `removed` must be exactly the difference from the previous version.
 */
export function readVocabularyFiles(dir = VOCABULARY_DATA_DIR): VocabularyFile[] {
  const files = readdirSync(dir)
    .filter((name) => /^emotions-\d+\.\d+\.\d+\.json$/.test(name))
    .map((name) => JSON.parse(readFileSync(join(dir, name), 'utf8')) as VocabularyFile)
    .sort((a, b) => compareVersions(a.version, b.version));

  let previous = new Set<string>();
  for (const file of files) {
    const names = new Set(file.emotions.map((emotion) => emotion.name));
    const added = [...names].filter((name) => !previous.has(name)).sort();
    const removed = [...previous].filter((name) => !names.has(name)).sort();
    if (JSON.stringify(added) !== JSON.stringify([...file.added].sort())) {
      throw new Error(`Vocabulary ${file.version}: "added" should be ${JSON.stringify(added)}`);
    }
    if (JSON.stringify(removed) !== JSON.stringify([...file.removed].sort())) {
      throw new Error(`Vocabulary ${file.version}: "removed" should be ${JSON.stringify(removed)}`);
    }
    if (Number.isNaN(Date.parse(file.published_at))) {
      throw new Error(`Vocabulary ${file.version}: "published_at" is not a date`);
    }
    previous = names;
  }
  return files;
}
