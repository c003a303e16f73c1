// A PostgreSQL with pgvector for the specs (test/support/pgvector-database.ts): PGlite, the
// server compiled to WebAssembly, with the extensions the migrations create, served on loopback
// over the wire protocol. Run by Node itself, not Jest: PGlite loads its parts by dynamic import,
// which Jest's CommonJS runtime refuses. Prints "listening" once it answers; ends on SIGTERM.
import { PGlite } from '@electric-sql/pglite';
import { btree_gin } from '@electric-sql/pglite/contrib/btree_gin';
import { uuid_ossp } from '@electric-sql/pglite/contrib/uuid_ossp';
import { vector } from '@electric-sql/pglite-pgvector';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

const port = Number(process.argv[2]);
const db = await PGlite.create({ extensions: { vector, uuid_ossp, btree_gin } });
const server = new PGLiteSocketServer({ db, port, host: '127.0.0.1', maxConnections: 16 });
await server.start();
process.stdout.write('listening\n');
process.once('SIGTERM', async () => {
  await server.stop();
  await db.close();
  process.exit(0);
});
