import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

const root = join(__dirname, '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');

interface ComposeService {
  image?: string;
  build?: unknown;
  ports?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: unknown };
  volumes?: string[];
}

/** Variables the service reads, taken from the validated config classes in src/config. */
function configVariables(): string[] {
  const dir = join(root, 'src', 'config');
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

// No Docker engine runs in CI: these checks read the files the way Docker and an operator would.
describe('Deployment files', () => {
  const readme = read('README.md');
  const compose = parse(read('docker-compose.yml')) as {
    services: Record<string, ComposeService>;
    volumes?: object;
  };

  it('docker-compose.yml names the services the README promises, with their ports', () => {
    expect(Object.keys(compose.services).sort()).toEqual([
      'app',
      'mailpit',
      'postgres',
      'redis',
      'stripe-mock',
    ]);
    const ports = Object.values(compose.services).flatMap((service) => service.ports ?? []);
    for (const port of ports) {
      const published = port.split(':')[0];
      expect(readme).toContain(published);
    }
    expect(compose.services.app.ports).toContain('3000:3000');
  });

  it('the app waits for a healthy PostgreSQL and Redis; PostgreSQL keeps its data in a volume', () => {
    const app = compose.services.app;
    expect(app.build).toBeDefined();
    expect(app.depends_on?.postgres).toEqual({ condition: 'service_healthy' });
    expect(app.depends_on?.redis).toEqual({ condition: 'service_healthy' });
    expect(compose.services.postgres.healthcheck?.test).toBeDefined();
    expect(compose.services.redis.healthcheck?.test).toBeDefined();
    const volume = compose.services.postgres.volumes?.[0] ?? '';
    expect(volume.split(':')[1]).toBe('/var/lib/postgresql/data');
    expect(Object.keys(compose.volumes ?? {})).toContain(volume.split(':')[0]);
  });

  it("the app's variables in compose are all real, documented configuration", () => {
    const known = configVariables();
    for (const name of Object.keys(compose.services.app.environment ?? {})) {
      expect(known).toContain(name);
      expect(readme).toContain(`\`${name}\``);
    }
    const url = new URL(compose.services.app.environment!.DATABASE_URL);
    expect(url.hostname).toBe('postgres');
    expect(url.pathname).toBe(`/${compose.services.postgres.environment!.POSTGRES_DB}`);
  });

  it('the README configuration table documents every variable the service reads', () => {
    const documented = configVariables().filter((name) => !readme.includes(`\`${name}\``));
    expect(documented).toEqual([]);
    for (const name of ['EMBEDDED_PG_DATA_DIR', 'EMBEDDED_PG_PORT'])
      expect(readme).toContain(`\`${name}\``);
  });

  it('the Dockerfile builds in one stage and runs non-root with production dependencies and a health check', () => {
    const dockerfile = read('Dockerfile');
    const stages = [...dockerfile.matchAll(/^FROM \S+ AS (\S+)$/gm)].map((match) => match[1]);
    expect(stages).toEqual(['build', 'deps', 'runtime']);
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('FROM '));
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/^HEALTHCHECK .*\n?.*\/health\/live/m);
    expect(runtime).toMatch(/^CMD \["node", "dist\/main\.js"\]$/m);
    expect(runtime).not.toMatch(/COPY --from=build \S* ?\/app\/node_modules/);
    expect(dockerfile).toContain('npm ci --omit=dev --omit=optional');
    const dockerignore = read('.dockerignore');
    for (const entry of ['node_modules', '.data', 'dist'])
      expect(dockerignore.split('\n')).toContain(entry);
  });

  it('the README shows the two commands', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm ci && npm test');
  });
});
