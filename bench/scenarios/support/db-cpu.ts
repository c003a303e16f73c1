import { Client } from 'pg';
import { cpuSeconds } from '../../lib/cpu';

/**
 * CPU seconds so far of each PostgreSQL server process connected to the database (one per pooled
 * connection): the database's share of a request, less sensitive than requests/s to the
 * neighbours on a shared machine.
 */
export async function backendCpu(databaseUrl: string): Promise<Map<number, number>> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    const cpu = new Map<number, number>();
    for (const { pid } of rows) {
      try {
        cpu.set(pid, cpuSeconds(pid));
      } catch {
        // the connection closed meanwhile
      }
    }
    return cpu;
  } finally {
    await client.end();
  }
}

/** The CPU seconds the database's server processes used between two backendCpu readings. */
export function cpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let seconds = 0;
  for (const [pid, value] of after) seconds += value - (before.get(pid) ?? 0);
  return seconds;
}
