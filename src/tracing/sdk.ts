import type { Attributes, Span } from '@opentelemetry/api';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { NodeSDK } from '@opentelemetry/sdk-node';
// Loading http before the SDK starts is harmless: its exports are patched in place on later requires.
import { IncomingMessage, type RequestOptions } from 'node:http';
import { isIP } from 'node:net';
import { routeTemplateOf } from '../common/http/route-template';

/** Probes and scrapes arrive every few seconds and would bury the traces worth reading. */
const UNTRACED_PATHS = /^\/(health\/|metrics(\?|$))/;

/** What a trace says of the path of a request no route matched. */
const UNMATCHED = '(unmatched)';
/** The attributes, old and stable HTTP conventions, that carry the request's raw path or URL. */
const PATH_ATTRIBUTES = ['http.target', 'http.url', 'url.path', 'url.full', 'url.query'];

/** The longest value a span keeps of what an anonymous caller sends (User-Agent, Host). */
const CALLER_VALUE_LIMIT = 256;

/**
 * What an outgoing call's span says of its URL: the origin only. A webhook endpoint's or tool's
 * path and query are the receiver's credentials (Slack and Zapier hook paths, `?token=`), which
 * the trace store must not keep (found by review: `url.full` carried them whole).
 */
function originOf(options: RequestOptions): string {
  const protocol = options.protocol ?? 'http:';
  const host = options.hostname ?? options.host?.replace(/:\d+$/, '') ?? 'localhost';
  const bracketed = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `${protocol}//${bracketed}${options.port ? `:${String(options.port)}` : ''}`;
}

/** The longest IP address written out (an IPv4-mapped IPv6 one); a zone id (`%…`) is not kept. */
const IP_ADDRESS_LIMIT = 45;

/**
 * The caller's address as a span keeps it, as the service reads it (`request.ip`): under
 * TRUST_PROXY the last X-Forwarded-For entry (the one our load balancer appended) when it is an
 * IP address, else the connection's peer. The instrumentation took the first entry, which the
 * client writes itself, any text up to the header's 16 KiB (review).
 */
export function clientAddressOf(request: IncomingMessage, trustProxy: boolean): string | undefined {
  const peer = request.socket.remoteAddress;
  const header = request.headers['x-forwarded-for'];
  if (!trustProxy || header === undefined) return peer;
  // Empty entries skipped, as Express's parser skips them.
  const entries = (Array.isArray(header) ? header.join(',') : header)
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  const appended = entries[entries.length - 1] ?? '';
  return appended.length <= IP_ADDRESS_LIMIT && !appended.includes('%') && isIP(appended)
    ? appended
    : peer;
}

/**
 * The caller's User-Agent and Host as a span keeps them (at most CALLER_VALUE_LIMIT characters),
 * and its address (clientAddressOf).
 */
function callerValues(request: IncomingMessage, trustProxy: boolean): Attributes {
  const values: Attributes = {};
  // Always set, unknown included: the instrumentation's own value (X-Forwarded-For's first
  // entry, any text) must not stand when the peer cannot be read.
  values['client.address'] = clientAddressOf(request, trustProxy);
  const { 'user-agent': userAgent, host } = request.headers;
  if (userAgent !== undefined)
    values['user_agent.original'] = userAgent.slice(0, CALLER_VALUE_LIMIT);
  if (host !== undefined) {
    values['server.address'] = host.replace(/:\d+$/, '').slice(0, CALLER_VALUE_LIMIT);
  }
  return values;
}

/** Replaces every path attribute the instrumentation set with the route template. */
function scrubPath(span: Span, shown: string): void {
  const attributes = (span as Span & { attributes?: Record<string, unknown> }).attributes ?? {};
  for (const name of PATH_ATTRIBUTES) {
    if (name in attributes) span.setAttribute(name, name === 'url.query' ? '' : shown);
  }
}

/**
 * The OpenTelemetry Node SDK with the instrumentations this service needs. Everything else
 * (exporter endpoint, headers, protocol, sampler, propagators, resource attributes) comes from
 * the standard OTEL_* variables, which the SDK reads itself.
 */
export function createTracingSdk(options: { trustProxy: boolean }): NodeSDK {
  return new NodeSDK({
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (read by the SDK's env detector) win.
    resource: defaultResource().merge(
      resourceFromAttributes({ 'service.name': 'personality-api' }),
    ),
    // Traces only: metrics are Prometheus's (src/metrics) and logs go to stdout. Without these
    // empty lists the SDK would also start OTLP metric and log exporters.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      // Incoming requests (continuing an incoming W3C traceparent) and outgoing ones, among
      // them the Stripe SDK's.
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request) => UNTRACED_PATHS.test(request.url ?? ''),
        // Overrides the attributes the instrumentation derives from the request (its hooks' win).
        startOutgoingSpanHook: (options) => ({ 'url.full': originOf(options) }),
        startIncomingSpanHook: (request) => callerValues(request, options.trustProxy),
        // Names the server span after the route template (`GET /v1/end-users/:user_id`) as it
        // ends. The Express instrumentation would do it too, but it wraps every middleware layer
        // and cost as much again as the rest of tracing (bench/results/observability.json).
        applyCustomAttributesOnSpan: (span, request) => {
          if (!(request instanceof IncomingMessage)) return; // an outgoing call
          const route = routeTemplateOf(request);
          // The path as a trace keeps it: the template, never a raw user_id (often an e-mail
          // address) nor a query string, which would outlive an erasure in the trace store.
          scrubPath(span, route ?? UNMATCHED);
          if (!route) return;
          span.setAttribute('http.route', route);
          span.updateName(`${request.method} ${route}`);
        },
      }),
      // Queries inside a request only: the erasure worker's polls would each start a trace.
      new PgInstrumentation({ requireParentSpan: true, ignoreConnectSpans: true }),
      // The command's name only: its arguments name buckets by client address and by a digest
      // of the end user's user_id, which a trace store would keep past an erasure (review).
      new IORedisInstrumentation({
        requireParentSpan: true,
        dbStatementSerializer: (command) => command,
      }),
    ],
  });
}
