import type { DataSource } from 'typeorm';
import { pendingMigrations } from './run-migrations';

describe('pendingMigrations', () => {
  it('lists what the database has not recorded, oldest first, whatever order they were loaded in', async () => {
    const dataSource = {
      options: { migrationsTableName: 'typeorm_migrations' },
      migrations: [
        'AddThird1790000000003',
        'CreateFirst1763776800000',
        'AddSecond1790000000002',
      ].map((name) => ({ name })),
      query: (text: string) =>
        Promise.resolve(
          text.startsWith('SELECT to_regclass')
            ? [{ exists: true }]
            : [{ name: 'CreateFirst1763776800000' }],
        ),
    } as unknown as DataSource;
    await expect(pendingMigrations(dataSource)).resolves.toEqual([
      'AddSecond1790000000002',
      'AddThird1790000000003',
    ]);
  });
});
