import { Client } from 'pg';
import { buildRevision } from '../lib/build-revision';
import { type RunningService, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { round2 } from './support/stats';

/**
 * What one reply writes (issue 29: fewer writes per reply): the WAL the service's database gets
 * per reply, and, read back with pg_walinspect, by relation and record type. Two traffic shapes:
 * one end user sending the same sentence (long-history's worst case) and 500 end users taking
 * turns. WARMUP replies first, so every posting list is full and the trims run; then a
 * CHECKPOINT, and the MEASURED replies are counted. Done for the code before part three
 * (BENCH_BEFORE, d950df2) and for this tree. WAL bytes do not depend on the machine's load.
 */

const BEFORE = process.env.BENCH_BEFORE ?? 'd950df2';
const WARMUP = 600;
const MEASURED = 400;
const CONCURRENCY = 32;
const MESSAGE = 'I took my dog Rex to the park again today and he loved it, I love that dog.';

/** The database's own WAL records between two positions: `rel spc/db/relfilenode` in block_ref. */
const OWN_RECORDS = `SELECT r.*, substring(r.block_ref from 'rel \\d+/\\d+/(\\d+)') AS relfilenode
  FROM pg_get_wal_records_info($1, $2) r
 WHERE substring(r.block_ref from 'rel \\d+/(\\d+)/')::oid =
       (SELECT oid FROM pg_database WHERE datname = current_database())`;

async function sendReplies(
  service: RunningService,
  auth: string,
  personalityId: string,
  count: number,
  userFor: (n: number) => string,
): Promise<void> {
  let sent = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (sent < count) {
        const userId = userFor(sent++);
        const response = await fetch(`${service.baseUrl}/v1/respond`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: auth },
          body: JSON.stringify({
            personality_id: personalityId,
            user_id: userId,
            message: MESSAGE,
          }),
        });
        await response.arrayBuffer();
        if (response.status !== 200) throw new Error(`reply answered ${response.status}`);
      }
    }),
  );
}

async function walPerReply(main: string | undefined, userFor: (n: number) => string) {
  const service = await startService({ main });
  const db = new Client({ connectionString: service.databaseUrl });
  try {
    await db.connect();
    await db.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    const tenant = await benchTenant(service.baseUrl);
    await sendReplies(service, tenant.auth, tenant.personalityId, WARMUP, userFor);
    await db.query('CHECKPOINT');
    const lsn = async () =>
      (await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn;
    const start = await lsn();
    await sendReplies(service, tenant.auth, tenant.personalityId, MEASURED, userFor);
    const end = await lsn();
    const total = await db.query<{ bytes: string; records: string }>(
      `SELECT sum(record_length)::text AS bytes, count(*)::text AS records FROM (${OWN_RECORDS}) o`,
      [start, end],
    );
    const byRelation = await db.query<{
      relation: string;
      kind: string;
      records: string;
      bytes: string;
      fpi: string;
    }>(
      `SELECT coalesce(c.relname, o.relfilenode) AS relation,
              o.resource_manager || '/' || o.record_type AS kind, count(*)::text AS records,
              sum(o.record_length)::text AS bytes, sum(o.fpi_length)::text AS fpi
         FROM (${OWN_RECORDS}) o LEFT JOIN pg_class c ON c.relfilenode::text = o.relfilenode
        GROUP BY 1, 2 ORDER BY sum(o.record_length) DESC LIMIT 12`,
      [start, end],
    );
    return {
      bytes_per_reply: Math.round(Number(total.rows[0].bytes) / MEASURED),
      records_per_reply: round2(Number(total.rows[0].records) / MEASURED),
      largest: byRelation.rows.map((row) => ({
        relation: row.relation,
        kind: row.kind,
        records_per_reply: round2(Number(row.records) / MEASURED),
        bytes_per_reply: Math.round(Number(row.bytes) / MEASURED),
        of_which_full_page_images: Math.round(Number(row.fpi) / MEASURED),
      })),
    };
  } finally {
    await db.end().catch(() => undefined);
    await service.stop();
  }
}

export async function run(): Promise<Record<string, unknown>> {
  const before = buildRevision(BEFORE);
  const shapes = {
    one_end_user: () => 'wal-one-user',
    many_end_users: (n: number) => `wal-user-${n % 500}`,
  };
  const figures: Record<string, unknown> = {};
  try {
    for (const [name, main] of [
      ['before', before.main],
      ['this_tree', undefined],
    ] as const) {
      const perShape: Record<string, unknown> = {};
      for (const [shape, userFor] of Object.entries(shapes)) {
        perShape[shape] = await walPerReply(main, userFor);
      }
      figures[name] = perShape;
    }
  } finally {
    before.cleanup();
  }
  return {
    method: `${WARMUP} replies, a CHECKPOINT, then ${MEASURED} replies counted, ${CONCURRENCY} at a time, local engine, the same sentence; WAL records of the service's database only (pg_walinspect), record lengths including full-page images; ${BEFORE} (before part three) and this tree`,
    message: MESSAGE,
    before_revision: before.revision,
    ...figures,
  };
}
