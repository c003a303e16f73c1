import {
  catalogEntryProblems,
  parseCatalog,
  readCatalogFile,
  SHIPPED_CATALOG_PATH,
} from './catalog-file';

describe('catalog files', () => {
  it('accepts the shipped catalog: at least five entries, every template set filled', () => {
    const entries = readCatalogFile(SHIPPED_CATALOG_PATH);
    expect(entries.length).toBeGreaterThanOrEqual(5);
    for (const entry of entries) {
      expect(entry.description.length).toBeGreaterThan(40);
      expect(entry.system_prompt.length).toBeGreaterThan(80);
      for (const valence of ['positive', 'negative', 'ambiguous', 'neutral'] as const) {
        expect(entry.replies[valence].length).toBeGreaterThan(0);
      }
      expect(entry.replies.recall.every((template) => template.includes('{memory}'))).toBe(true);
    }
  });

  it('refuses the whole file, listing every problem with its entry and field', () => {
    const [good] = readCatalogFile(SHIPPED_CATALOG_PATH);
    const text = JSON.stringify([good, { ...good, slug: 'Bad Slug', version: 2 }]);
    expect(() => parseCatalog(text, 'x.json')).toThrow(
      /x.json was refused, nothing was imported:\n- entry 2 \("Bad Slug"\) \/slug must match pattern.*\n- entry 2 \("Bad Slug"\) \/version must be string/s,
    );
    expect(() => parseCatalog('[]')).toThrow(/must NOT have fewer than 1 items/);
  });

  it('checks one entry on its own, naming problems by JSON pointer inside it', () => {
    const [entry] = readCatalogFile(SHIPPED_CATALOG_PATH);
    expect(catalogEntryProblems(entry)).toEqual([]);
    expect(
      catalogEntryProblems({
        ...entry,
        slug: 'Not A Slug',
        voice: { ...entry.voice, formality: 'loud' as never },
        replies: { ...entry.replies, positive: [] },
      }),
    ).toEqual([
      { field: '/slug', problem: expect.stringMatching(/^must match pattern/) },
      { field: '/voice/formality', problem: 'must be one of ["casual","neutral","formal"]' },
      { field: '/replies/positive', problem: 'must NOT have fewer than 1 items' },
    ]);
  });
});
