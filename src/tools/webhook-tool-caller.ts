import { Inject, Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { hashCanonicalJson } from '../common/json/canonical-json';
import { Clock } from '../common/time/clock';
import { MAX_KEY_LENGTH } from '../common/http/spooled-document';
import { pointerToken } from '../common/validation/json-schema-problems';
import {
  forbiddenKeyIn,
  holdsKeyLongerThan,
  isStorableJson,
  jsonNestsDeeperThan,
  MAX_JSON_DEPTH,
  nonFiniteNumberAt,
} from '../common/validation/untrusted-json';
import { type ToolsConfig, toolsConfig } from '../config/tools.config';
import { type WebhooksConfig, webhooksConfig } from '../config/webhooks.config';
import { sendWebhook } from '../webhooks/webhook-sender';
import { signatureHeaders } from '../webhooks/webhook-signer';
import { portProblem } from '../webhooks/webhook-url';
import { DEFAULT_TOOL_TIMEOUT_MS, MAX_PARAMETERS_BYTES } from './tool-definitions';
import { ToolTurnsRepository } from './tool-turns.repository';

/** A webhook tool's output, serialised, at most this many bytes (contract §26). */
export const MAX_OUTPUT_BYTES = MAX_PARAMETERS_BYTES;
/** The answer read: its output and the `{"output": }` around it, with room for white space. */
const MAX_ANSWER_BYTES = MAX_OUTPUT_BYTES + 1024;

/**
 * The event id of a webhook tool's call, `evt_` and 32 hex digits as every event's: derived from
 * the turn, its round, the tool, its arguments (as canonical JSON: key order aside) and which
 * call of the round with those it is (`occurrence`, from 0), so a resumption retried after a
 * failure (the turn given back), whose model asks the same calls again in any order, sends each
 * with the same id, and a receiver deduplicating by webhook-id (Standard Webhooks) runs it once.
 * Another call, or the same one in another round or turn, gets another id.
 */
export function toolCallEventId(
  turnId: string,
  round: number,
  name: string,
  args: unknown,
  occurrence: number,
): string {
  const hash = createHash('sha256').update(JSON.stringify([turnId, round, name, occurrence]));
  return `evt_${hashCanonicalJson(hash, args).digest('hex').slice(0, 32)}`;
}

export interface WebhookToolCall {
  /**
   * The event's id (`evt_…`, the webhook-id header): the same for the same call asked again
   * (toolCallEventId), so a receiver that deduplicates by it runs the call once.
   */
  eventId: string;
  organizationId: string;
  endpointId: string;
  timeoutMs?: number;
  signal: AbortSignal;
  data: {
    tool_call_id: string;
    name: string;
    arguments: unknown;
    user_id: string;
    personality_id: string;
    turn_id: string;
  };
}

/** What the model is given: the output, or `{error}` with `error` set. */
export interface WebhookToolResult {
  output: unknown;
  error: string | null;
  durationMs: number | null;
  /** Refused by TOOL_CALLS_IN_FLIGHT_PER_ORG, not sent. */
  throttled?: boolean;
}

/**
 * Calls webhook tools (contract §26): a `tool.call` event POSTed to the tool's endpoint, signed
 * with its secret as every event is (§17), under the URL rules and SSRF guard checked at each
 * call, no redirect followed, within the tool's timeout. Whatever goes wrong becomes an error
 * output for the model; nothing is retried. At most TOOL_CALLS_IN_FLIGHT_PER_ORG calls per
 * organization at once on this instance, a quarter of them per end user.
 */
@Injectable()
export class WebhookToolCaller {
  private readonly inFlight = new Map<string, number>();

  constructor(
    private readonly repository: ToolTurnsRepository,
    private readonly clock: Clock,
    @Inject(toolsConfig.KEY) private readonly config: ToolsConfig,
    @Inject(webhooksConfig.KEY) private readonly webhooks: WebhooksConfig,
  ) {}

  async call(call: WebhookToolCall): Promise<WebhookToolResult> {
    const organization = call.organizationId;
    // An end user's turns, however many at once, hold at most a quarter of the organization's
    // slots (4 of 16 by default): its other end users keep the rest (found by review).
    const endUser = `${organization}\n${call.data.user_id}`;
    const perOrganization = this.config.callsInFlightPerOrganization;
    const perEndUser = Math.max(1, Math.floor(perOrganization / 4));
    let refused: string | null = null;
    if ((this.inFlight.get(organization) ?? 0) >= perOrganization) refused = 'organization';
    else if ((this.inFlight.get(endUser) ?? 0) >= perEndUser) refused = 'end user';
    if (refused) {
      return {
        ...failed(`too many tool calls in flight for the ${refused}`, null),
        throttled: true,
      };
    }
    for (const key of [organization, endUser])
      this.inFlight.set(key, (this.inFlight.get(key) ?? 0) + 1);
    try {
      return await this.send(call);
    } finally {
      for (const key of [organization, endUser]) {
        const left = (this.inFlight.get(key) ?? 1) - 1;
        if (left > 0) this.inFlight.set(key, left);
        else this.inFlight.delete(key);
      }
    }
  }

  private async send(call: WebhookToolCall): Promise<WebhookToolResult> {
    const endpoint = await this.repository.findEndpoint(call.organizationId, call.endpointId);
    if (!endpoint) return failed('the endpoint no longer exists', null);
    if (endpoint.status !== 'enabled') return failed('the endpoint is disabled', null);
    const badPort = URL.canParse(endpoint.url)
      ? portProblem(new URL(endpoint.url), this.webhooks.allowedPorts)
      : 'invalid URL';
    if (badPort) return failed(badPort, null);

    const now = this.clock.now();
    const id = call.eventId;
    const body = JSON.stringify({
      id,
      type: 'tool.call',
      created_at: now.toISOString(),
      organization_id: call.organizationId,
      data: call.data,
    });
    const headers = signatureHeaders(endpoint.secret, id, Math.floor(now.getTime() / 1000), body);
    const result = await sendWebhook(endpoint.url, body, headers, {
      timeoutMs: call.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
      allowPrivateUrls: this.webhooks.allowPrivateUrls,
      signal: call.signal,
      maxBodyBytes: MAX_ANSWER_BYTES,
    });
    if (result.kind === 'aborted') {
      call.signal.throwIfAborted();
      return failed('aborted', null);
    }
    if (result.kind === 'error') return failed(result.error, result.durationMs);
    const { status, durationMs } = result;
    if (status >= 300 && status < 400)
      return failed(`redirect (${status}) not followed`, durationMs);
    if (status < 200 || status >= 300) return failed(`the endpoint answered ${status}`, durationMs);
    return outputOf(result.body ?? '', durationMs);
  }
}

function failed(error: string, durationMs: number | null): WebhookToolResult {
  return { output: { error }, error, durationMs };
}

/** The `output` of a 2xx answer `{"output": …}`, at most MAX_OUTPUT_BYTES serialised. */
function outputOf(body: string, durationMs: number): WebhookToolResult {
  // Serialising what is deeper overflows the stack (a 500), as parsing would in PostgreSQL.
  if (jsonNestsDeeperThan(Buffer.from(body), MAX_JSON_DEPTH)) {
    return failed(`bad body: nests deeper than ${MAX_JSON_DEPTH} levels`, durationMs);
  }
  let answer: unknown;
  try {
    answer = JSON.parse(body);
  } catch {
    return failed('bad body: not JSON', durationMs);
  }
  if (answer === null || typeof answer !== 'object' || !('output' in answer)) {
    return failed('bad body: no "output"', durationMs);
  }
  const { output } = answer;
  if (Buffer.byteLength(JSON.stringify(output)) > MAX_OUTPUT_BYTES) {
    return failed(`bad body: output over ${MAX_OUTPUT_BYTES} bytes`, durationMs);
  }
  // Kept with the turn and the reply (jsonb), which cannot hold them.
  if (!isStorableJson(output)) {
    return failed('bad body: output holds U+0000 or an unpaired surrogate', durationMs);
  }
  // Its end user's export would hold a key that an import refuses.
  if (holdsKeyLongerThan(output, MAX_KEY_LENGTH)) {
    return failed(
      `bad body: output holds a key longer than ${MAX_KEY_LENGTH} characters`,
      durationMs,
    );
  }
  const forbidden = forbiddenKeyIn(output);
  if (forbidden !== undefined) {
    return failed(
      `bad body: output holds the key ${forbidden}, which a request may not`,
      durationMs,
    );
  }
  // 1e999 parses as Infinity, which the model, the turn and the memory would be given as null.
  // Checked after the keys, which its message names.
  const unwritable = nonFiniteNumberAt(output);
  if (unwritable) {
    const where =
      unwritable.length === 0 ? 'is' : `holds at /${unwritable.map(pointerToken).join('/')}`;
    return failed(`bad body: output ${where} a number JSON cannot write`, durationMs);
  }
  return { output, error: null, durationMs };
}
