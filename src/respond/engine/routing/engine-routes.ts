import OpenAI from 'openai';
import type { EngineConfig } from '../../../config/engine.config';
import type { BreakerRoute } from './circuit-breakers';

/** A model on a provider: what one attempt asks, and which breaker answers for it. */
export interface Route extends BreakerRoute {
  readonly model: string;
  readonly client: OpenAI;
}

/** Models of personalities this instance keeps a Route for (a customer may set any string). */
const PRIMARY_ROUTES_MAX = 500;

/** `https://host/v1` without user, password, query or fragment: safe for a metric label. */
function displayUrl(baseUrl: string): string {
  try {
    const url = new URL(baseUrl);
    return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
  } catch {
    return 'invalid-url';
  }
}

/**
 * The routes a reply may take (§21): the personality's model (or OPENAI_MODEL) on
 * OPENAI_BASE_URL with OPENAI_API_KEY, then each of OPENAI_FALLBACKS in order, a route that
 * repeats an earlier one (same base URL and model) left out. One SDK client per distinct base URL
 * and key, made at start-up, with no retries of its own: the router retries.
 */
export class EngineRoutes {
  private readonly clients = new Map<string, OpenAI>();
  private readonly primaryClient: OpenAI;
  private readonly primaries = new Map<string, Route>();
  private readonly defaultModel: string;
  readonly fallbacks: readonly Route[];

  constructor(config: EngineConfig) {
    this.primaryClient = this.clientFor(config.openaiBaseUrl, config.openaiApiKey, config);
    this.defaultModel = config.openaiModel;
    this.fallbacks = config.fallbacks.map((fallback) =>
      this.route(fallback.model, this.clientFor(fallback.baseUrl, fallback.apiKey, config), true),
    );
  }

  /** The default route and the fallbacks: every route the configuration names. */
  configured(): Route[] {
    return [this.primary(null), ...this.fallbacks];
  }

  /** The routes of a reply, in the order they are tried. */
  forModel(personalityModel: string | null): Route[] {
    const primary = this.primary(personalityModel);
    const routes = [primary];
    for (const fallback of this.fallbacks) {
      if (!routes.some((route) => route.key === fallback.key)) routes.push(fallback);
    }
    return routes;
  }

  /** Distinct SDK clients (for the specs: one per base URL and key). */
  get clientCount(): number {
    return this.clients.size;
  }

  private primary(personalityModel: string | null): Route {
    const model = personalityModel ?? this.defaultModel;
    let route = this.primaries.get(model);
    if (!route) {
      if (this.primaries.size >= PRIMARY_ROUTES_MAX) this.primaries.clear();
      route = this.route(model, this.primaryClient, model === this.defaultModel);
      this.primaries.set(model, route);
    }
    return route;
  }

  private route(model: string, client: OpenAI, configured: boolean): Route {
    const baseUrl = client.baseURL;
    return {
      key: `${baseUrl}\n${model}`,
      label: `${model}@${displayUrl(baseUrl)}`,
      model,
      client,
      configured,
    };
  }

  private clientFor(baseUrl: string | undefined, apiKey: string, config: EngineConfig): OpenAI {
    const key = `${baseUrl ?? ''}\n${apiKey}`;
    let client = this.clients.get(key);
    if (!client) {
      client = new OpenAI({ apiKey, baseURL: baseUrl, maxRetries: 0, timeout: config.timeoutMs });
      this.clients.set(key, client);
    }
    return client;
  }
}
