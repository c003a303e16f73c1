import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ensureBuilt, runBuilt, waitUntilReady, type BuiltProcess } from './built-app';
import { createFreshDatabase, type FreshDatabase } from './fresh-database';
import { freePort } from './ports';

/**
 * The TypeScript client's two generated files, kept in step with the service (contract §24):
 * `clients/typescript/openapi.json`, the document the built service serves at
 * `GET /v1/openapi.json`, and `src/generated/openapi.ts`, what openapi-typescript makes of it.
 * `npm run client:openapi` rewrites both; test/typescript-client.e2e-spec.ts fails when either
 * differs from what the service and openapi-typescript make now.
 */
const root = join(__dirname, '..', '..');
export const CLIENT_DIR = join(root, 'clients', 'typescript');
export const DOCUMENT_FILE = join(CLIENT_DIR, 'openapi.json');
export const TYPES_FILE = join(CLIENT_DIR, 'src', 'generated', 'openapi.ts');
export const REGENERATE = 'npm run client:openapi';

/** As served, in the service's own key order; two-space indent and a final newline. */
export function documentText(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/** The document of a running service, as the committed file holds it. */
export async function fetchDocumentText(baseUrl: string): Promise<string> {
  const response = await fetch(`${baseUrl}/v1/openapi.json`);
  if (!response.ok) throw new Error(`GET /v1/openapi.json answered ${response.status}`);
  return documentText(await response.json());
}

/**
 * What openapi-typescript (the client's devDependency, through its CLI: it loads ES modules that
 * Jest's runtime cannot) makes of the document in `documentFile`.
 */
export function typesFor(documentFile: string): string {
  const cli = join(root, 'node_modules', 'openapi-typescript', 'bin', 'cli.js');
  // A default makes a field optional in a request (`stream` of /v1/respond), not required.
  const types = execFileSync(
    process.execPath,
    [cli, documentFile, '--default-non-nullable=false'],
    {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  // The null branch of a nullable object (`{type: object, nullable: true, enum: [null]}`, see
  // admitNullObjects in src/common/openapi/setup-openapi.ts) comes out as `(never | null)`.
  const readable = types.replaceAll(' | (never | null)', ' | null');
  return `// \`${REGENERATE}\` writes this file from ../../openapi.json.\n${readable}`;
}

export interface ServiceForClient {
  baseUrl: string;
  process: BuiltProcess;
  stop(): Promise<void>;
}

/**
 * The built service (`node dist/main.js`, built first when src/ changed) on a fresh database of
 * its own on the server of `serverUrl`, or on an embedded PostgreSQL without one.
 */
export async function startBuiltService(
  serverUrl: string | undefined,
  env: Record<string, string> = {},
): Promise<ServiceForClient> {
  ensureBuilt();
  const database: FreshDatabase = await createFreshDatabase('client', serverUrl);
  const port = await freePort();
  const service = runBuilt('main.js', [], {
    DATABASE_URL: database.url,
    PORT: String(port),
    METRICS_PORT: '0',
    LOG_LEVEL: 'warn',
    REDIS_URL: '',
    ...env,
  });
  const stop = async () => {
    await service.stop();
    await database.drop();
  };
  try {
    await waitUntilReady(service, port);
  } catch (error) {
    await stop();
    throw error;
  }
  return { baseUrl: `http://127.0.0.1:${port}`, process: service, stop };
}

/** `npm run client:openapi`: rewrites both files from the service as built from this tree. */
async function main(): Promise<void> {
  const service = await startBuiltService(process.env.DATABASE_URL);
  try {
    const document = await fetchDocumentText(service.baseUrl);
    writeFileSync(DOCUMENT_FILE, document);
    writeFileSync(TYPES_FILE, typesFor(DOCUMENT_FILE));
    const changed = [DOCUMENT_FILE, TYPES_FILE].map((file) => relative(root, file));
    process.stdout.write(`wrote ${changed.join(' and ')}\n`);
  } finally {
    await service.stop();
  }
}

/** The committed document, for the drift check. */
export function committedDocument(): string {
  return readFileSync(DOCUMENT_FILE, 'utf8');
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(
      `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  });
}
