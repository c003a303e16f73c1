import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { QUERIES_DIR, renderQueries } from '../src/queries/statements';

describe('checked-in statements (src/queries)', () => {
  it.each([...renderQueries()])('%s is the statement the service sends', (file, content) => {
    const checkedIn = readFileSync(join(QUERIES_DIR, file), 'utf8');
    if (checkedIn !== content) {
      throw new Error(
        `src/queries/${file} differs from the statements sent: run npm run sql:generate`,
      );
    }
  });
});
