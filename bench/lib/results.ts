import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';

/** Writes a scenario's figures, with the machine they were measured on, to bench/results/. */
export function writeResults(name: string, figures: Record<string, unknown>): string {
  const dir = join(__dirname, '..', 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.json`);
  const document = {
    scenario: name,
    measured_at: new Date().toISOString(),
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version },
    ...figures,
  };
  writeFileSync(file, `${JSON.stringify(document, null, 2)}\n`);
  return file;
}
