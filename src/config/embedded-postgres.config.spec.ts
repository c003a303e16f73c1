import { embeddedPostgresConfig } from './embedded-postgres.config';

describe('embedded PostgreSQL config', () => {
  const names = ['EMBEDDED_PG_PORT', 'EMBEDDED_PG_DATA_DIR'] as const;
  let saved: Partial<Record<(typeof names)[number], string>>;
  beforeEach(() => {
    saved = Object.fromEntries(names.map((name) => [name, process.env[name]]));
  });
  afterEach(() => {
    for (const name of names) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  });

  it.each(['abc', '0', '65536', '1.5'])(
    'stops start-up on EMBEDDED_PG_PORT=%s, naming the variable (review)',
    (value) => {
      process.env.EMBEDDED_PG_PORT = value;
      expect(() => embeddedPostgresConfig()).toThrow(/EMBEDDED_PG_PORT/);
    },
  );

  it('takes an empty value as unset, as every variable', () => {
    process.env.EMBEDDED_PG_PORT = '';
    process.env.EMBEDDED_PG_DATA_DIR = '';
    expect(embeddedPostgresConfig()).toEqual({ dataDir: '.data/postgres', port: 54329 });
    process.env.EMBEDDED_PG_PORT = '5433';
    expect(embeddedPostgresConfig().port).toBe(5433);
  });
});
