import { readCatalogFile } from './catalog-file';
import type { PersonalitiesService } from './personalities.service';

/** `catalog import <file.json>`: validates the whole file, then upserts every entry by slug. */
export async function importCatalogCommand(
  personalities: PersonalitiesService,
  path: string,
): Promise<string> {
  const entries = readCatalogFile(path);
  await personalities.importCatalog(entries);
  return `Imported ${entries.length} catalog entr${entries.length === 1 ? 'y' : 'ies'}: ${entries
    .map((entry) => `${entry.slug}@${entry.version}`)
    .join(', ')}`;
}
