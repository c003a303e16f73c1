import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import { parseAllDocuments } from 'yaml';
import { configLoaders } from '../src/config';
import { deployedVariables } from './support/config-variables';
import { ANSWER_BEFORE_EXIT_MS } from '../src/common/lifecycle/shutdown-signal';

const dir = join(__dirname, '..', 'deploy', 'kubernetes');

/** The schema-backed model of each kind the manifests use; `.validate()` checks the object. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'batch/v1/Job': Job,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
};

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

function manifests(): Array<{ file: string; doc: Manifest }> {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.yaml') && file !== 'kustomization.yaml')
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((document) => {
        if (document.errors.length > 0) throw new Error(`${file}: ${document.errors[0].message}`);
        return { file, doc: document.toJSON() as Manifest };
      }),
    );
}

function one<T>(kind: string): T {
  const found = manifests().filter(({ doc }) => doc.kind === kind);
  expect(found).toHaveLength(1);
  return found[0].doc as unknown as T;
}

describe('Kubernetes manifests (deploy/kubernetes)', () => {
  const deployment = one<Deployment>('Deployment');
  const pod = deployment.spec!.template.spec!;
  const api = pod.containers[0];
  const config = one<ConfigMap>('ConfigMap');
  const secret = one<Secret>('Secret');
  const job = one<Job>('Job');
  const data = config.data!;

  it('every manifest is valid against the Kubernetes schema of its kind', () => {
    const seen: string[] = [];
    for (const { file, doc } of manifests()) {
      const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      if (!Model) throw new Error(`${file}: no schema for ${doc.apiVersion} ${doc.kind}`);
      expect(() => new Model(doc as never).validate()).not.toThrow();
      seen.push(doc.kind);
    }
    expect(seen.sort()).toEqual([
      'ConfigMap',
      'Deployment',
      'HorizontalPodAutoscaler',
      'Job',
      'PodDisruptionBudget',
      'Secret',
      'Service',
      'ServiceAccount',
    ]);
  });

  it('the validator is real: a malformed Deployment is refused', () => {
    const broken = structuredClone(deployment) as unknown as {
      spec: { template: { spec: { containers: Array<Record<string, unknown>> } } };
    };
    broken.spec.template.spec.containers[0].ports = [{ containerPort: 'http' }];
    expect(() => new Deployment(broken as never).validate()).toThrow(/containerPort/);
  });

  it('kustomization.yaml applies everything but the example Secret and the migration Job', () => {
    const kustomization = parseAllDocuments(
      readFileSync(join(dir, 'kustomization.yaml'), 'utf8'),
    )[0].toJSON() as { resources: string[] };
    const files = readdirSync(dir).filter((file) => file !== 'kustomization.yaml');
    expect([...kustomization.resources, 'migrate-job.yaml', 'secret.example.yaml'].sort()).toEqual(
      files.sort(),
    );
  });

  it('wires every variable the service reads through the ConfigMap or the Secret', () => {
    const wired = [...Object.keys(data), ...Object.keys(secret.stringData ?? {})];
    // The embedded PostgreSQL's variables are not among them: a deployment sets DATABASE_URL.
    const missing = deployedVariables().filter((name) => !wired.includes(name));
    expect(missing).toEqual([]);
    // No typo: every key is a variable the service reads.
    for (const name of wired) expect(deployedVariables()).toContain(name);
    // Each key in one place only.
    expect(new Set(wired).size).toBe(wired.length);
    for (const spec of [pod, job.spec!.template.spec!]) {
      expect(spec.containers[0].envFrom).toEqual([
        { configMapRef: { name: config.metadata!.name } },
        { secretRef: { name: secret.metadata!.name } },
      ]);
    }
  });

  it("the ConfigMap and Secret values pass the service's own validation", () => {
    const saved = process.env;
    process.env = { ...data, ...(secret.stringData ?? {}) };
    try {
      for (const load of configLoaders) expect(() => load()).not.toThrow();
    } finally {
      process.env = saved;
    }
    expect(data.NODE_ENV).toBe('production');
    // Secrets never sit in the ConfigMap.
    for (const name of ['DATABASE_URL', 'JWT_SECRET', 'STRIPE_SECRET_KEY', 'REDIS_URL', 'SMTP_URL'])
      expect(data).not.toHaveProperty(name);
  });

  it('Deployment: both probes on the health endpoints, the metrics port declared, non-root, read-only root', () => {
    const port = (name: string) => api.ports!.find((p) => p.name === name)?.containerPort;
    expect(port('http')).toBe(Number(data.PORT));
    expect(port('metrics')).toBe(Number(data.METRICS_PORT));
    expect(api.livenessProbe?.httpGet).toEqual({ path: '/health/live', port: 'http' });
    expect(api.readinessProbe?.httpGet).toEqual({ path: '/health/ready', port: 'http' });
    expect(pod.securityContext?.runAsNonRoot).toBe(true);
    expect(api.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    expectWritableTmp(pod, api);
    for (const kind of ['requests', 'limits'] as const) {
      expect(api.resources?.[kind]).toEqual({ cpu: expect.anything(), memory: expect.anything() });
    }
    // The autoscaler owns the replica count.
    expect(deployment.spec).not.toHaveProperty('replicas');
  });

  it('Deployment: the grace period outlasts the preStop pause plus SHUTDOWN_TIMEOUT_MS', () => {
    const pause = Number((api.lifecycle?.preStop?.exec?.command ?? ['sleep', '0'])[1]);
    expect(pod.terminationGracePeriodSeconds! * 1000).toBeGreaterThan(
      pause * 1000 + Number(data.SHUTDOWN_TIMEOUT_MS),
    );
  });

  it('ConfigMap: a reply begun before SIGTERM has its whole ENGINE_TIMEOUT_MS before it is abandoned', () => {
    // A reply still waiting on its provider ANSWER_BEFORE_EXIT_MS before SHUTDOWN_TIMEOUT_MS is
    // abandoned (503).
    expect(Number(data.SHUTDOWN_TIMEOUT_MS) - ANSWER_BEFORE_EXIT_MS).toBeGreaterThan(
      Number(data.ENGINE_TIMEOUT_MS),
    );
  });

  it('Service, PodDisruptionBudget and HorizontalPodAutoscaler select the Deployment', () => {
    const labels = deployment.spec!.template.metadata!.labels!;
    const selects = (selector: Record<string, string>) =>
      Object.entries(selector).every(([key, value]) => labels[key] === value);
    const service = one<Service>('Service');
    expect(selects(service.spec!.selector!)).toBe(true);
    expect(service.spec!.ports!.map((p) => p.targetPort)).toEqual(['http', 'metrics']);
    const pdb = one<PodDisruptionBudget>('PodDisruptionBudget');
    expect(selects(pdb.spec!.selector!.matchLabels!)).toBe(true);
    const hpa = one<HorizontalPodAutoscaler>('HorizontalPodAutoscaler');
    expect(hpa.spec!.scaleTargetRef).toMatchObject({
      kind: 'Deployment',
      name: deployment.metadata!.name,
    });
    // An eviction never takes the last pod: the floor is above what the budget keeps.
    expect(hpa.spec!.minReplicas).toBeGreaterThan(Number(pdb.spec!.minAvailable));
    expect(pod.serviceAccountName).toBe(one<ServiceAccount>('ServiceAccount').metadata!.name);
  });

  it('the migration Job runs `node dist/cli.js migrate` from the same image; the pods do not migrate', () => {
    const migrate = job.spec!.template.spec!.containers[0];
    expect(migrate.command).toEqual(['node', 'dist/cli.js', 'migrate']);
    expect(migrate.image).toBe(api.image);
    expect(job.spec!.template.spec!.restartPolicy).toBe('Never');
    expect(job.spec!.template.spec!.securityContext?.runAsNonRoot).toBe(true);
    expect(migrate.securityContext?.readOnlyRootFilesystem).toBe(true);
    expectWritableTmp(job.spec!.template.spec!, migrate);
    expect(data.MIGRATE_ON_START).toBe('false');
  });
});

function expectWritableTmp(spec: IPodSpec, container: IContainer): void {
  const mount = container.volumeMounts?.find((m) => m.mountPath === '/tmp');
  expect(mount).toBeDefined();
  expect(spec.volumes?.find((v) => v.name === mount!.name)?.emptyDir).toBeDefined();
}
