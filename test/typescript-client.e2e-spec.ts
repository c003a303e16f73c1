import { execFile } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  CLIENT_DIR,
  committedDocument,
  DOCUMENT_FILE,
  fetchDocumentText,
  REGENERATE,
  startBuiltService,
  TYPES_FILE,
  typesFor,
  type ServiceForClient,
} from './support/client-openapi';
import { FakeOpenAI } from './support/fake-openai';

const run = promisify(execFile);
const root = join(__dirname, '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');

/** The package's only runtime dependencies (contract §24). */
const RUNTIME_DEPENDENCIES = ['eventsource-parser', 'openapi-fetch', 'standardwebhooks'];

interface PackedFile {
  path: string;
  size: number;
}
interface Packed {
  filename: string;
  size: number;
  unpackedSize: number;
  files: PackedFile[];
}

/** `npm pack` (its prepack script builds with tsup) into `destination`; npm's JSON report. */
async function pack(destination: string): Promise<Packed> {
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: CLIENT_DIR,
    maxBuffer: 16 * 1024 * 1024,
  });
  // The prepack script's own output comes first, on the same stdout.
  const [report] = JSON.parse(stdout.slice(stdout.search(/^\[/m))) as Packed[];
  return report;
}

/** The ```ts blocks of the package's README, each a module of its own. */
function readmeExamples(): string[] {
  const readme = readFileSync(join(CLIENT_DIR, 'README.md'), 'utf8');
  return [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1]);
}

/** Where a JSON document first differs from another, as JSON pointers (at most `max`). */
function differences(a: unknown, b: unknown, path = '', max = 10, found: string[] = []): string[] {
  if (found.length >= max) return found;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    if (JSON.stringify(a) !== JSON.stringify(b)) found.push(path || '/');
    return found;
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    const child = `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    differences(
      (a as Record<string, unknown>)[key],
      (b as Record<string, unknown>)[key],
      child,
      max,
      found,
    );
  }
  if (JSON.stringify(Object.keys(a)) !== JSON.stringify(Object.keys(b)) && found.length === 0)
    found.push(`${path || '/'} (key order)`);
  return found;
}

/**
 * The TypeScript client (clients/typescript, contract §24) as its users get it: `npm pack`ed,
 * installed from the tarball into a project of its own, its tests compiled there against the
 * installed declarations and run with `node --test` (the ES module build; one file through
 * require(), the CommonJS build) against the built service on a fresh database. The service's
 * model provider is a local fake, so that a reply can fail mid-stream on demand.
 */
describe('TypeScript client: @personality-api/client, packed, against the built service', () => {
  let fake: FakeOpenAI;
  let service: ServiceForClient;
  let project: string;
  let packed: Packed;

  beforeAll(async () => {
    project = mkdtempSync(join(tmpdir(), 'personality-api-client-'));
    fake = await FakeOpenAI.start();
    service = await startBuiltService(process.env.DATABASE_URL, {
      RESPONSE_ENGINE: 'openai',
      OPENAI_BASE_URL: fake.url,
      OPENAI_API_KEY: 'sk-client-tests',
      OPENAI_MODEL: 'fake-model',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      // The receivers of the tests listen on random ports (contract §25).
      WEBHOOK_ALLOWED_PORTS: '1-65535',
      WEBHOOK_POLL_INTERVAL_MS: '100',
      // Every test file signs a user up: roomy buckets, as the e2e apps have.
      RATE_LIMIT_ORG_RPS: '10000',
      RATE_LIMIT_ORG_BURST: '10000',
      RATE_LIMIT_IP_RPS: '10000',
      RATE_LIMIT_IP_BURST: '10000',
      RATE_LIMIT_AUTH_RPS: '10000',
      RATE_LIMIT_AUTH_BURST: '10000',
    });

    packed = await pack(project);
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'client-consumer', private: true, type: 'module' }),
    );
    await run(
      'npm',
      ['install', `./${packed.filename}`, '--prefer-offline', '--no-audit', '--no-fund'],
      { cwd: project },
    );

    // What a user's project compiles: the tests and the README's examples, against the
    // installed package's declarations (`import` and `require` flavours alike).
    cpSync(join(CLIENT_DIR, 'test'), join(project, 'test'), {
      filter: (source) => !source.endsWith('tsconfig.json'),
      recursive: true,
    });
    mkdirSync(join(project, 'readme'));
    readmeExamples().forEach((example, index) =>
      writeFileSync(join(project, 'readme', `example-${index + 1}.ts`), example),
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          strict: true,
          outDir: 'build',
          rootDir: '.',
          types: ['node'],
          typeRoots: [join(root, 'node_modules', '@types')],
        },
        include: ['test'],
      }),
    );
    writeFileSync(
      join(project, 'tsconfig.readme.json'),
      JSON.stringify({
        extends: './tsconfig.json',
        compilerOptions: { noEmit: true },
        include: ['readme'],
      }),
    );
    await compile('tsconfig.json');
  }, 300_000);

  afterAll(async () => {
    await service?.stop();
    await fake?.close();
    if (project) rmSync(project, { recursive: true, force: true });
  });

  describe('the generated files are in step', () => {
    it(`clients/typescript/openapi.json is the service's GET /v1/openapi.json`, async () => {
      const served = await fetchDocumentText(service.baseUrl);
      const committed = committedDocument();
      if (served !== committed) {
        const where = differences(JSON.parse(committed), JSON.parse(served));
        throw new Error(
          `${DOCUMENT_FILE} differs from the document the service serves now ` +
            `(first differences: ${where.join(', ') || 'formatting'}).\n` +
            `Run \`${REGENERATE}\` and commit both files it writes.`,
        );
      }
    });

    it('src/generated/openapi.ts is what openapi-typescript makes of openapi.json', () => {
      const expected = typesFor(DOCUMENT_FILE);
      if (readFileSync(TYPES_FILE, 'utf8') !== expected)
        throw new Error(
          `${TYPES_FILE} is not what openapi-typescript makes of openapi.json: ` +
            `run \`${REGENERATE}\` and commit both files it writes.`,
        );
    });
  });

  it('packs ES module, CommonJS and declarations, with three runtime dependencies', () => {
    const paths = packed.files.map((file) => file.path).sort();
    expect(paths).toEqual(
      expect.arrayContaining([
        'README.md',
        'dist/index.d.mts',
        'dist/index.d.ts',
        'dist/index.js',
        'dist/index.mjs',
        'package.json',
      ]),
    );
    expect(paths.every((path) => /^(dist\/|README\.md$|package\.json$)/.test(path))).toBe(true);
    const manifest = JSON.parse(
      readFileSync(
        join(project, 'node_modules', '@personality-api', 'client', 'package.json'),
        'utf8',
      ),
    ) as { dependencies: Record<string, string>; peerDependencies?: unknown };
    expect(Object.keys(manifest.dependencies).sort()).toEqual(RUNTIME_DEPENDENCIES);
    expect(manifest.peerDependencies).toBeUndefined();
  });

  it('the README examples compile against the installed package', async () => {
    expect(readmeExamples().length).toBeGreaterThanOrEqual(8);
    await compile('tsconfig.readme.json');
  }, 120_000);

  /** Compiles the consumer project (tsc, strict, nodenext), failing with tsc's report. */
  async function compile(tsconfig: string): Promise<void> {
    await run(process.execPath, [tsc, '-p', join(project, tsconfig)], { cwd: project }).catch(
      (error: Error & { stdout?: string }) => {
        throw new Error(`tsc -p ${tsconfig} failed:\n${error.stdout ?? error.message}`);
      },
    );
  }

  /** Runs one compiled test file of the client with node's test runner, against the service. */
  async function clientTest(file: string): Promise<void> {
    const compiled = join(project, 'build', 'test', file);
    try {
      await run(process.execPath, ['--test', compiled], {
        cwd: project,
        env: { ...process.env, PERSONALITY_API_URL: service.baseUrl },
        timeout: 120_000,
      });
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      throw new Error(
        `${file} failed:\n${stdout ?? ''}${stderr ?? ''}\nservice:\n${service.process.output()}`,
      );
    }
  }

  it('typed calls, credentials and errors', () => clientTest('typed-calls.test.js'), 120_000);
  it('respond and respondStream', () => clientTest('respond.test.js'), 120_000);
  it('respondStream: an error event when the reply fails after it started', async () => {
    fake.respondWith({ stream: { chunkSize: 4, intervalMs: 20, dropAfter: 4 } });
    await clientTest('respond-stream-error.test.js');
  }, 120_000);
  it(
    'respondStream: malformed and oversized events, from a local server',
    () => clientTest('respond-stream-malformed.test.js'),
    120_000,
  );
  it('paginate', () => clientTest('paginate.test.js'), 120_000);
  it('retries and idempotency keys', () => clientTest('retries.test.js'), 120_000);
  it('verifyWebhook on real deliveries', () => clientTest('webhooks.test.js'), 120_000);
  it('the CommonJS build', () => clientTest('commonjs.test.cjs'), 120_000);

  it('every test file of the client ran here', () => {
    const files = readdirSync(join(CLIENT_DIR, 'test')).filter((name) =>
      /\.test\.c?ts$/.test(name),
    );
    expect(files.sort()).toEqual(
      [
        'commonjs.test.cts',
        'paginate.test.ts',
        'respond-stream-error.test.ts',
        'respond-stream-malformed.test.ts',
        'respond.test.ts',
        'retries.test.ts',
        'typed-calls.test.ts',
        'webhooks.test.ts',
      ].sort(),
    );
  });
});
