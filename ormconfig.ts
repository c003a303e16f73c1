import { DataSource } from 'typeorm';
import { buildDataSourceOptions } from './src/database/data-source-options';

// The DataSource of the TypeORM CLI (npm run migration:generate|run|revert); the app builds its
// options with the same function. The CLI needs DATABASE_URL: the embedded server's URL is
// printed at start-up by `npm start`.
if (!process.env.DATABASE_URL) {
  throw new Error(
    'DATABASE_URL must be set for the TypeORM CLI (e.g. postgres://postgres@127.0.0.1:5432/app)',
  );
}

export default new DataSource(buildDataSourceOptions({ url: process.env.DATABASE_URL }));
