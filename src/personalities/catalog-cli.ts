import { readCatalogFile } from './catalog-file';
import type { CatalogEntryFile } from './entities/personality-definition';
import type { PersonalitiesService } from './personalities.service';

export function describeImport(entries: CatalogEntryFile[]): string {
  const noun = entries.length === 1 ? 'entry' : 'entries';
  return `Imported ${entries.length} catalog ${noun}: ${entries
    .map((entry) => `${entry.slug}@${entry.version}`)
    .join(', ')}`;
}

/**
 * `catalog import <file.json>` on a running application context: validates the whole file,
 * then upserts every entry by slug (src/cli.ts validates before it even connects).
 */
export async function importCatalogCommand(
  personalities: PersonalitiesService,
  path: string,
): Promise<string> {
  const entries = readCatalogFile(path);
  await personalities.importCatalog(entries);
  return describeImport(entries);
}
