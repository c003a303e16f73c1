import autocannon from 'autocannon';

export interface LoadFigures {
  requests_per_sec: number;
  latency_p50_ms: number;
  latency_p99_ms: number;
  errors: number;
  non_2xx: number;
  requests: number;
}

export interface LoadOptions {
  url: string;
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers?: Record<string, string>;
  body?: string;
  connections?: number;
  durationSeconds?: number;
  /** Per-request customisation (e.g. a new user_id each time). */
  requests?: autocannon.Request[];
  /** Stop after this many requests (before durationSeconds if sooner). */
  amount?: number;
}

/** Runs autocannon against a URL on loopback and returns its key figures. */
export async function load(options: LoadOptions): Promise<LoadFigures> {
  const result = await autocannon({
    url: options.url,
    method: options.method ?? 'GET',
    headers: options.headers,
    body: options.body,
    connections: options.connections ?? 32,
    duration: options.durationSeconds ?? 10,
    requests: options.requests,
    ...(options.amount === undefined ? {} : { amount: options.amount }),
  });
  return {
    requests_per_sec: Math.round(result.requests.average),
    latency_p50_ms: result.latency.p50,
    latency_p99_ms: result.latency.p99,
    errors: result.errors + result.timeouts,
    non_2xx: result.non2xx,
    requests: result.requests.total,
  };
}
