import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { AppError, type FieldProblem } from '../common/errors/app-error';
import { MAX_KEY_LENGTH } from '../common/http/spooled-document';
import {
  forbiddenKeyIn,
  holdsKeyLongerThan,
  isStorableJson,
  nonFiniteNumberAt,
  toStorableText,
} from '../common/validation/untrusted-json';
import type { WithEntry } from '../database/sql';
import { Clock } from '../common/time/clock';
import { newUlid } from '../common/crypto/ulid';
import { inClientSpan } from '../tracing/spans';
import {
  type ErasedEndUser,
  ErasesEndUsers,
  ErasureOrder,
} from '../common/erasure/erasure-participant';
import type { EntityManager } from 'typeorm';
import { type ToolsConfig, toolsConfig } from '../config/tools.config';
import {
  type EngineReply,
  type EngineToolCall,
  type EngineToolResult,
  type ReplyRequest,
  TOOL_CALL_ID_MAX_CHARACTERS,
  TOOL_CALL_NAME_MAX_CHARACTERS,
  type TokenUsage,
} from '../respond/engine/response-engine';
import {
  type RequestTool,
  type ToolDefinition,
  toolProblems,
  unsafeSchemaProblem,
} from './tool-definitions';
import { OrganizationsService } from '../organizations/organizations.service';
import { type SchemaTenant, toolSchemas } from './tool-schemas';
import { saidSoFar, type ToolCallRecord, type ToolTurnState } from './tool-turn-state';
import { type PausedAt, ToolTurnsRepository } from './tool-turns.repository';
import { MAX_OUTPUT_BYTES, toolCallEventId, WebhookToolCaller } from './webhook-tool-caller';
import { ToolMetrics } from './tool-metrics';

/** What a turn with tools needs to know about its conversation. */
export interface ToolTurnContext {
  organizationId: string;
  endUserId: string;
  userId: string;
  personalityId: string;
  personalityTools: ToolDefinition[];
  /** Where the turn stands: fresh for a new message, the paused state for a resumption. */
  state: ToolTurnState;
  /** The client's: a webhook tool's call is abandoned when it goes. */
  signal: AbortSignal;
  /** The steps that count tokens of the turn's model calls, written with its pause. */
  tokenSteps: (usage: TokenUsage, model: string | null, at: Date) => WithEntry[];
  /** Awaited before a pause is saved (Generation.beforePause): it may add to the state saved. */
  beforePause?: () => Promise<void>;
  /**
   * The message is one of crisis (docs/safety.md): no tool is offered, so the reply and its
   * crisis lines come now, not after a pause the business may never resume (found by review).
   */
  crisis?: boolean;
}

/** One model call of the turn, given the tools it may call and the earlier rounds' results. */
export type AskEngine = (
  extra: Pick<ReplyRequest, 'tools' | 'toolResults' | 'onUncountedSpend'>,
) => Promise<EngineReply>;

export type ToolTurnOutcome =
  | { kind: 'completed'; reply: EngineReply; toolCalls: ToolCallRecord[] }
  | { kind: 'paused'; turnId: string; toolCalls: EngineToolCall[] };

/** A tool of the turn: the personality's or the request's (those are always the client's). */
type TurnTool = Pick<
  ToolDefinition,
  'name' | 'description' | 'parameters' | 'execution' | 'endpoint_id' | 'timeout_ms'
>;

/** The state of a turn that has made no model call yet. */
export function freshToolState(
  userId: string,
  message: string,
  requestTools: RequestTool[],
): ToolTurnState {
  return {
    turnId: `turn_${newUlid()}`,
    userId,
    message,
    requestTools,
    results: [],
    round: { calls: [], outputs: {} },
    pending: [],
    rounds: 0,
    usage: null,
    model: null,
    records: [],
  };
}

function addUsage(total: TokenUsage | null, more: TokenUsage | null): TokenUsage | null {
  if (!more) return total;
  if (!total) return { ...more };
  return {
    promptTokens: total.promptTokens + more.promptTokens,
    completionTokens: total.completionTokens + more.completionTokens,
    cachedTokens: total.cachedTokens + more.cachedTokens,
  };
}

/**
 * The tool-calling loop of a turn (contract §26, docs/tools.md): the engine is asked with the
 * turn's tools for at most TOOL_MAX_ROUNDS rounds, then without; arguments that fail a tool's
 * schema go back to it as an error output; client calls pause the turn in `tool_turns`, from
 * where any instance resumes it once, with the client's outputs.
 */
@Injectable()
export class ToolTurnsService {
  constructor(
    private readonly repository: ToolTurnsRepository,
    private readonly webhooks: WebhookToolCaller,
    private readonly metrics: ToolMetrics,
    private readonly clock: Clock,
    @Inject(toolsConfig.KEY) private readonly config: ToolsConfig,
    private readonly organizations: OrganizationsService,
  ) {}

  /** A paused turn holds the user's message: it goes with the end user. */
  @ErasesEndUsers({ order: ErasureOrder.DATA, tables: ['tool_turns'] })
  eraseEndUsers(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    return this.repository.deleteOfEndUsers(manager, endUsers);
  }

  /**
   * A request's own tools (contract §26), or 400 naming each problem: checked before the
   * reply's reads (the organization's account aside, read once and kept).
   */
  async requestTools(organizationId: string, tools: readonly unknown[]): Promise<RequestTool[]> {
    if (tools.length === 0) return [];
    const account = await this.organizations.accountOf(organizationId);
    const problems = await toolProblems({ organizationId, account }, [...tools], 'request');
    if (problems.length > 0) throw AppError.validation(problems);
    return tools as RequestTool[];
  }

  /**
   * The state a new turn starts from, or 400 when one of the request's tools takes the name of
   * one of the personality's.
   */
  start(
    request: { userId: string; message: string; tools: RequestTool[] },
    personalityTools: readonly ToolDefinition[],
  ): ToolTurnState {
    const taken = new Set(personalityTools.map((tool) => tool.name));
    const clashes = request.tools.flatMap((tool, index) =>
      taken.has(tool.name)
        ? [{ field: `tools/${index}/name`, problem: 'is a tool of the personality already' }]
        : [],
    );
    if (clashes.length > 0) throw AppError.validation(clashes);
    return freshToolState(request.userId, request.message, request.tools);
  }

  /** The turn's answer, or its pause for client tools (saved, so any instance resumes it). */
  async run(context: ToolTurnContext, ask: AskEngine): Promise<ToolTurnOutcome> {
    const tools = new Map<string, TurnTool>();
    for (const tool of context.personalityTools) tools.set(tool.name, tool);
    for (const tool of context.state.requestTools) {
      tools.set(tool.name, { ...tool, execution: 'client' });
    }
    const state = context.state;
    const engineTools = [...tools.values()].map(({ name, description, parameters }) => ({
      name,
      description,
      parameters,
    }));
    for (;;) {
      const canCall =
        !context.crisis && engineTools.length > 0 && state.rounds < this.config.maxRounds;
      const reply = await ask({
        tools: canCall ? engineTools : undefined,
        toolResults: state.results.length > 0 ? state.results : undefined,
        // Counted with the turn's calls: in its reply, or by RespondService.endFailedTurn.
        onUncountedSpend: (estimate, model) => {
          state.usage = addUsage(state.usage, estimate);
          state.model = state.model ?? model;
        },
      });
      state.usage = addUsage(state.usage, reply.usage);
      state.model = reply.model ?? state.model;
      const calls = canCall ? answerable((reply.toolCalls ?? []).map(storableCall)) : [];
      if (calls.length === 0) {
        const { toolCalls: _asked, ...answer } = reply;
        return {
          kind: 'completed',
          reply: {
            ...answer,
            // What the model said in the rounds before, a blank line apart (ToolRounds streams
            // the same separator).
            text: saidSoFar(state) + answer.text,
            usage: state.usage,
            model: reply.model ?? state.model,
          },
          toolCalls: state.records,
        };
      }
      // The end user saw it (streamed) or will (the reply begins with it): it is kept and
      // screened, as streamed.
      const said = reply.text || undefined;
      state.rounds += 1;
      const outputs: Record<string, unknown> = {};
      const pending: EngineToolCall[] = [];
      const webhookCalls: Array<Promise<void>> = [];
      const eventIds = new EventIdsOfRound(state.turnId, state.rounds);
      // Every call's arguments checked at once: the round waits for the schema worker's job
      // running when it came, not for one job of another tenant's between each of its own
      // (found by review: 8 calls waited 7.5 s behind another tenant's slow checks).
      // Whose turn the checks wait in: read at a round of calls (OrganizationsService keeps it),
      // not for a turn that calls no tool.
      const owner: SchemaTenant = {
        organizationId: context.organizationId,
        account: await this.organizations.accountOf(context.organizationId),
      };
      const problems = await Promise.all(
        calls.map((call) => {
          const tool = tools.get(call.name);
          return tool
            ? this.argumentsProblem(owner, tool, call.arguments)
            : Promise.resolve('no such tool');
        }),
      );
      for (const [index, call] of calls.entries()) {
        const tool = tools.get(call.name);
        const problem = problems[index];
        if (problem || !tool) {
          setOutput(outputs, call.id, { error: problem });
          state.records.push(record(call, outputs[call.id], tool?.execution ?? 'client', problem));
          this.metrics.count(tool?.execution ?? 'client', 'invalid', null);
        } else if (tool.execution === 'webhook') {
          webhookCalls.push(
            this.callWebhook(context, tool, call, eventIds.of(call)).then((result) => {
              const outcome = result.throttled ? 'throttled' : result.error ? 'error' : 'ok';
              this.metrics.count('webhook', outcome, result.durationMs);
              setOutput(outputs, call.id, result.output);
              state.records.push({
                ...record(call, result.output, 'webhook', result.error),
                duration_ms: result.durationMs,
              });
            }),
          );
        } else {
          pending.push(call);
        }
      }
      // A round's webhook tools are called together; the turn waits for the slowest.
      await Promise.all(webhookCalls);
      if (pending.length > 0) return this.pause(context, { calls, outputs, said }, pending);
      state.results.push(...roundResults({ calls, outputs, said }));
    }
  }

  /**
   * The user_id of the end user a turn of the organization answers (undefined: no such turn),
   * whose rate bucket a resumption draws from, as their reply did.
   */
  userIdOfTurn(organizationId: string, turnId: string): Promise<string | undefined> {
    return this.repository.userIdOf(organizationId, turnId);
  }

  /**
   * The paused turn's state once the client's outputs join it: 404 for an unknown, foreign or
   * expired turn, 400 unless every pending call has exactly one output, 409 `turn_not_pending`
   * when it was resumed already. Nothing is claimed yet: `claim` does, once the resumption is
   * known to go ahead (a 402 or 409 of the conversation leaves the turn pending), for the pause
   * `answered` (as read: the calls pending, the rounds made).
   */
  async check(
    organizationId: string,
    turnId: string,
    outputs: Array<{ tool_call_id: string; output: unknown }>,
  ): Promise<{ personalityId: string; state: ToolTurnState; answered: PausedAt }> {
    const now = this.clock.now();
    const found = await this.repository.find(organizationId, turnId, now);
    // Expired: unknown, whatever it reached (a completed turn stays until the retention's pass).
    if (!found || found.expired) {
      throw AppError.notFound('Turn');
    }
    // Resumed, or completed (its state emptied with the exchange it stored).
    if (found.status !== 'pending' || found.state === null) throw notPending();
    const state = found.state;
    const answered: PausedAt = { pending: [...state.pending], rounds: state.rounds };
    const given = new Map<string, unknown>();
    const problems: FieldProblem[] = [];
    outputs.forEach((output, index) => {
      if (!state.pending.includes(output.tool_call_id)) {
        problems.push({
          field: `outputs.${index}.tool_call_id`,
          problem: 'must be the id of a pending tool call of this turn',
        });
      } else if (given.has(output.tool_call_id)) {
        problems.push({
          field: `outputs.${index}.tool_call_id`,
          problem: 'must not repeat: each call takes one output',
        });
      }
      // The bound a webhook tool's output has: it is kept with the turn and sent every round.
      if (Buffer.byteLength(JSON.stringify(output.output)) > MAX_OUTPUT_BYTES) {
        problems.push({
          field: `outputs.${index}.output`,
          problem: `must be at most ${MAX_OUTPUT_BYTES} bytes serialised`,
        });
      }
      given.set(output.tool_call_id, output.output);
    });
    const missing = state.pending.filter((id) => !given.has(id));
    if (missing.length > 0) {
      problems.push({ field: 'outputs', problem: `lacks the output of ${missing.join(', ')}` });
    }
    if (problems.length > 0) throw AppError.validation(problems);

    const { calls, outputs: known } = state.round;
    for (const call of calls) {
      if (!given.has(call.id)) continue;
      setOutput(known, call.id, given.get(call.id));
      state.records.push(record(call, known[call.id], 'client', null));
    }
    state.results.push(...roundResults(state.round));
    state.round = { calls: [], outputs: {} };
    state.pending = [];
    return { personalityId: found.personalityId, state, answered };
  }

  /**
   * Takes the turn for this resumption, which answers the pause `answered` (check's): of
   * concurrent claims, on any instance, exactly one wins; the others get 409 `turn_not_pending`,
   * and so does a claim whose turn was resumed and paused again since its check: it would run
   * the turn again from where it stood before.
   */
  async claim(organizationId: string, turnId: string, answered: PausedAt): Promise<void> {
    if (!(await this.repository.claim(organizationId, turnId, this.clock.now(), answered))) {
      throw notPending();
    }
  }

  /**
   * Counts the client's `outputs` of a resumption once its reply has gone through (stored, or
   * paused again): a claim given back (a 402 of a budget, a provider's failure) and sent again
   * would otherwise count them twice.
   */
  countOutputs(outputs: number): void {
    for (let i = 0; i < outputs; i += 1) this.metrics.count('client', 'ok', null);
  }

  /**
   * The resumption of a claimed turn failed before anything was stored (the provider failed or
   * timed out, the client left): the turn is pending again, so the client can send its outputs
   * again until the turn expires, instead of losing the user's message. `steps` count the tokens
   * of the model calls the failed resumption made, in the same statement: the turn kept gives
   * the retry none of them, so they are counted once.
   */
  release(organizationId: string, turnId: string, steps: WithEntry[] = []): Promise<void> {
    return this.repository.release(organizationId, turnId, steps);
  }

  /** In the statement storing a resumed turn's exchange: the turn completed with it. */
  completedStep(organizationId: string, turnId: string): WithEntry {
    return this.repository.completedStep(organizationId, turnId);
  }

  private async pause(
    context: ToolTurnContext,
    round: ToolTurnState['round'],
    pending: EngineToolCall[],
  ): Promise<ToolTurnOutcome> {
    const { state } = context;
    await context.beforePause?.();
    state.round = round;
    state.pending = pending.map((call) => call.id);
    const { turnId } = state;
    const now = this.clock.now();
    // The tokens so far are counted with the pause, in its statement: a turn that never resumes
    // has spent them too. The saved turn carries none, so a resumption counts only its own.
    const unwritten = state.usage;
    await this.repository.save(
      {
        id: turnId,
        organizationId: context.organizationId,
        endUserId: context.endUserId,
        personalityId: context.personalityId,
        state: { ...state, usage: null },
        expiresAt: new Date(now.getTime() + this.config.turnTtlSeconds * 1000),
      },
      now,
      this.config.pendingTurnsPerOrganization,
      unwritten ? context.tokenSteps(unwritten, state.model, now) : [],
    );
    state.usage = null;
    return {
      kind: 'paused',
      turnId,
      toolCalls: pending.map(({ id, name, arguments: args }) => ({ id, name, arguments: args })),
    };
  }

  /**
   * The call, as the event `eventId`, to its endpoint; traced as a client span, like the
   * engine's calls: the endpoint's time shows in the trace.
   */
  private callWebhook(
    context: ToolTurnContext,
    tool: TurnTool,
    call: EngineToolCall,
    eventId: string,
  ) {
    const attributes = { 'tool.name': call.name, 'tool.execution': 'webhook' };
    return inClientSpan(`tool ${call.name}`, attributes, () =>
      this.webhooks.call({
        eventId,
        organizationId: context.organizationId,
        endpointId: tool.endpoint_id ?? '',
        timeoutMs: tool.timeout_ms,
        signal: context.signal,
        data: {
          tool_call_id: call.id,
          name: call.name,
          arguments: call.arguments,
          user_id: context.userId,
          personality_id: context.personalityId,
          turn_id: context.state.turnId,
        },
      }),
    );
  }

  /** Why the engine's arguments do not fit the tool's schema, or undefined when they do. */
  private async argumentsProblem(
    tenant: SchemaTenant,
    tool: TurnTool,
    args: unknown,
  ): Promise<string | undefined> {
    // A tool stored before its schema's kind was refused (a recursive $ref) is not run on
    // arguments: its validation could run for hours.
    const unsafe = unsafeSchemaProblem(tool.parameters);
    if (unsafe) return `the tool's schema is no longer accepted (it ${unsafe}): define it again`;
    const check = await toolSchemas.validate(tenant, tool.parameters, args);
    if (check.valid) return undefined;
    if ('unchecked' in check) return `the arguments could not be checked: they ${check.unchecked}`;
    if ('schemaProblem' in check) {
      return `the tool's schema is no longer accepted (it ${check.schemaProblem}): define it again`;
    }
    return `the arguments do not match the tool's schema: ${check.instancePath || '/'} ${check.message}`;
  }
}

/** A round's calls with their outputs, for the model's next call; the first carries what it said. */
function roundResults({ calls, outputs, said }: ToolTurnState['round']): EngineToolResult[] {
  return calls.map((call, index) => ({
    call,
    output: outputs[call.id],
    ...(index === 0 && said ? { said } : {}),
  }));
}

function notPending(): AppError {
  return new AppError('turn_not_pending', 'The turn is not waiting for tool outputs any more');
}

/**
 * A model's call as the turn keeps it (jsonb, with the reply's memory): its name cut at
 * TOOL_CALL_NAME_MAX_CHARACTERS (a name no tool has, made up by the model), a NUL or an unpaired
 * surrogate in its id or name dropped or replaced, and arguments holding one are kept as
 * their JSON text, which fails the tool's schema (the model is told). Either reached
 * PostgreSQL's jsonb as it was, which refused it: a 500 any end user could cause by writing
 * `T({"a":"\\u0000"})` to a personality with tools. So are arguments holding a key longer than
 * an import takes (MAX_KEY_LENGTH): kept, they made the end user's export one that no import
 * takes back (found by review), or a key a request body may not hold (`__proto__`, `toString`,
 * `prototype`: FORBIDDEN_KEYS), which the import refuses too (found by review); and a number JSON cannot write (`1e999`, Infinity), which a
 * schema without a type for it let through and the webhook then got as null (found by review).
 * Arguments over MAX_OUTPUT_BYTES serialised, the bound an import puts on them (a large
 * ENGINE_MAX_TOKENS lets a model write them), are kept as a note of their size instead, which
 * fails the schema too (found by review).
 */
function storableCall(call: EngineToolCall): EngineToolCall {
  const storable =
    isStorableJson(call.arguments) &&
    !holdsKeyLongerThan(call.arguments, MAX_KEY_LENGTH) &&
    forbiddenKeyIn(call.arguments) === undefined &&
    nonFiniteNumberAt(call.arguments) === undefined;
  const kept = storable ? call.arguments : JSON.stringify(call.arguments);
  // Measured as the import measures it: the value kept, serialised (text is escaped again).
  const bytes = Buffer.byteLength(JSON.stringify(kept) ?? 'null');
  return {
    id: toStorableText(call.id),
    name: toStorableText(call.name.slice(0, TOOL_CALL_NAME_MAX_CHARACTERS)),
    arguments:
      bytes > MAX_OUTPUT_BYTES
        ? `(arguments of ${bytes} bytes, over the ${MAX_OUTPUT_BYTES} kept)`
        : kept,
  };
}

/**
 * The round's calls, each with an id a resumption can answer: one the model left empty, wrote
 * longer than TOOL_CALL_ID_MAX_CHARACTERS or gave two calls gets one of ours, in the turn's
 * state and in what the model is told alike (found by review: such a turn could never be
 * resumed, and calls sharing an id shared one output).
 */
function answerable(calls: EngineToolCall[]): EngineToolCall[] {
  const seen = new Set<string>();
  return calls.map((call) => {
    const usable =
      call.id.length > 0 && call.id.length <= TOOL_CALL_ID_MAX_CHARACTERS && !seen.has(call.id);
    const id = usable ? call.id : `call_${randomUUID().replaceAll('-', '')}`;
    seen.add(id);
    return usable ? call : { ...call, id };
  });
}

/** The event ids of one round's webhook calls (toolCallEventId): alike calls counted apart. */
class EventIdsOfRound {
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly turnId: string,
    private readonly round: number,
  ) {}

  of(call: EngineToolCall): string {
    const first = toolCallEventId(this.turnId, this.round, call.name, call.arguments, 0);
    const occurrence = this.seen.get(first) ?? 0;
    this.seen.set(first, occurrence + 1);
    return occurrence === 0
      ? first
      : toolCallEventId(this.turnId, this.round, call.name, call.arguments, occurrence);
  }
}

/** A call's error as a reply keeps it, at most: what a PMF document's tool call may hold. */
const TOOL_ERROR_MAX_CHARACTERS = 1_000;

/**
 * Keeps a call's output under its id as an own property: the provider chooses the ids, and
 * `outputs['__proto__'] = output` sets the object's prototype instead, so the output was lost
 * and the model sent `{}` (found by review).
 */
function setOutput(outputs: Record<string, unknown>, callId: string, output: unknown): void {
  Object.defineProperty(outputs, callId, {
    value: output,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

function record(
  call: EngineToolCall,
  output: unknown,
  execution: ToolCallRecord['execution'],
  error: string | null | undefined,
): ToolCallRecord {
  return {
    id: call.id,
    name: call.name,
    arguments: call.arguments,
    output,
    execution,
    duration_ms: null,
    // Cut as an export keeps it (pmf-v1): a schema's complaint names the model's own keys, and
    // a cut inside an emoji leaves half of it, which jsonb refuses (a 500, found by review).
    error:
      error === null || error === undefined
        ? null
        : toStorableText(error.slice(0, TOOL_ERROR_MAX_CHARACTERS)),
  };
}
