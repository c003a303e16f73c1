import OpenAI, { APIConnectionTimeoutError } from 'openai';
import { asRead } from '../local/confusables';
import type { LocalSafetyClassifier } from '../local/local-safety-classifier';
import {
  inCanonicalOrder,
  type SafetyCategory,
  type SafetyClassifier,
  type SafetyClassifyOptions,
  type SafetyVerdict,
} from '../safety-categories';

export const DEFAULT_MODERATION_MODEL = 'omni-moderation-latest';

/** Why the local classifier decided instead: for a log line or a metric. */
export type ModerationFallbackReason = 'timeout' | 'error' | 'invalid_response';

export interface OpenAiModerationOptions {
  apiKey: string;
  /** The provider's base URL (…/v1); the SDK's default when absent. */
  baseUrl?: string;
  /** Default `omni-moderation-latest`. */
  model?: string;
  /** The longest the whole exchange may take, headers and body; then the fallback decides. */
  timeoutMs: number;
  fallback: LocalSafetyClassifier;
  onFallback?: (reason: ModerationFallbackReason, error: unknown) => void;
}

/** OpenAI's categories that are ours outright. */
const MAPPED: Readonly<Record<string, SafetyCategory>> = {
  'self-harm': 'self_harm',
  'self-harm/intent': 'self_harm',
  'self-harm/instructions': 'self_harm',
  'sexual/minors': 'sexual_minors',
  'violence/graphic': 'violence',
};
/** Every answer must carry these as booleans; anything else is not an answer we can read. */
const REQUIRED_KEYS = [...Object.keys(MAPPED), 'violence'];

class InvalidModerationResponse extends Error {}

/**
 * The provider's `/v1/moderations` through the official SDK, with the local classifier deciding
 * whenever the endpoint fails, times out or answers something that is not a moderation result.
 *
 * Mapping: `self-harm`, `self-harm/intent`, `self-harm/instructions` → self_harm;
 * `sexual/minors` → sexual_minors; `violence/graphic` and `illicit/violent` (instructions for
 * violent wrongdoing) → violence. OpenAI's `violence` alone flags any depiction of violence, the
 * news, a story, a game, which in companion conversations is ordinary; so it maps to violence
 * only when the local rules also see a threat or instructions in the text.
 *
 * Text hidden with look-alike letters or invisible characters ("sеxy" with a Cyrillic "е") is
 * sent twice in one request, as written and as a person reads it (`asRead`), and a flag on
 * either counts: the provider judges the words it would otherwise not see, and text in other
 * scripts is still judged as written.
 *
 * No retries (`maxRetries: 0`): a failed moderation is decided locally at once rather than
 * holding the reply back. A caller that aborts gets the abort, not a fallback verdict.
 */
export class OpenAiModerationClassifier implements SafetyClassifier {
  readonly name = 'openai';
  private readonly client: OpenAI;
  private readonly model: string;
  private readonly timeoutMs: number;
  private readonly fallback: LocalSafetyClassifier;
  private readonly onFallback?: OpenAiModerationOptions['onFallback'];

  constructor(options: OpenAiModerationOptions) {
    this.client = new OpenAI({
      apiKey: options.apiKey,
      baseURL: options.baseUrl,
      maxRetries: 0,
      timeout: options.timeoutMs,
    });
    this.model = options.model ?? DEFAULT_MODERATION_MODEL;
    this.timeoutMs = options.timeoutMs;
    this.fallback = options.fallback;
    this.onFallback = options.onFallback;
  }

  async classify(text: string, options: SafetyClassifyOptions = {}): Promise<SafetyVerdict> {
    const { signal } = options;
    signal?.throwIfAborted();
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), this.timeoutMs);
    const read = asRead(text);
    const inputs = read === text ? [text] : [text, read];
    try {
      const response: unknown = await this.client.moderations.create(
        { model: this.model, input: inputs.length === 1 ? text : inputs },
        { signal: signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal },
      );
      return { categories: this.categoriesOf(response, text, inputs.length), decidedBy: 'openai' };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const reason: ModerationFallbackReason =
        deadline.signal.aborted || error instanceof APIConnectionTimeoutError
          ? 'timeout'
          : error instanceof InvalidModerationResponse || isJsonSyntaxError(error)
            ? 'invalid_response'
            : 'error';
      this.onFallback?.(reason, error);
      return this.fallback.classifySync(text);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The categories any of the `inputs` results flags. */
  private categoriesOf(response: unknown, text: string, inputs: number): SafetyCategory[] {
    const results = (response as { results?: unknown } | null)?.results;
    if (!Array.isArray(results) || results.length < inputs) {
      throw new InvalidModerationResponse(`the answer has fewer than ${inputs} results`);
    }
    const perInput = results.slice(0, inputs).map((result: unknown) => this.flagsOf(result));
    const found = perInput.flatMap((flags) => flags.categories);
    if (
      !found.includes('violence') &&
      perInput.some((flags) => flags.depictsViolence) &&
      this.fallback.classifySync(text).categories.includes('violence')
    ) {
      found.push('violence');
    }
    return inCanonicalOrder(found);
  }

  /**
   * Our categories one result flags, and whether it flags OpenAI's `violence`, which is ours only
   * when the local rules also see a threat or instructions.
   */
  private flagsOf(result: unknown): { categories: SafetyCategory[]; depictsViolence: boolean } {
    const flags = (result as { categories?: unknown } | undefined)?.categories;
    if (typeof flags !== 'object' || flags === null) {
      throw new InvalidModerationResponse('a result has no categories');
    }
    const flagged = flags as Record<string, unknown>;
    const illicitViolent = flagged['illicit/violent'];
    if (
      REQUIRED_KEYS.some((key) => typeof flagged[key] !== 'boolean') ||
      !(
        illicitViolent === undefined ||
        illicitViolent === null ||
        typeof illicitViolent === 'boolean'
      )
    ) {
      throw new InvalidModerationResponse('a category flag is missing or not a boolean');
    }
    const categories = Object.entries(MAPPED)
      .filter(([key]) => flagged[key] === true)
      .map(([, category]) => category);
    if (illicitViolent === true) categories.push('violence');
    return { categories, depictsViolence: flagged.violence === true };
  }
}

/** A body that is not JSON. By name: fetch's parser may throw another realm's SyntaxError. */
function isJsonSyntaxError(error: unknown): boolean {
  return (error as { name?: unknown } | null)?.name === 'SyntaxError';
}
