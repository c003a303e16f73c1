import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Variables the service reads, taken from the validated config classes in src/config. */
export function configVariables(): string[] {
  const dir = join(__dirname, '..', '..', 'src', 'config');
  const names = new Set<string>();
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.config.ts'))) {
    for (const match of readFileSync(join(dir, file), 'utf8').matchAll(
      /^\s+([A-Z][A-Z0-9_]+)\??: /gm,
    )) {
      names.add(match[1]);
    }
  }
  return [...names].sort();
}

/** Read only with DATABASE_URL unset (the embedded PostgreSQL): no deployment sets them. */
export const EMBEDDED_ONLY: readonly string[] = ['EMBEDDED_PG_DATA_DIR', 'EMBEDDED_PG_PORT'];

/** The variables a deployment (the Kubernetes manifests, compose) may set. */
export function deployedVariables(): string[] {
  return configVariables().filter((name) => !EMBEDDED_ONLY.includes(name));
}
