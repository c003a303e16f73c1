import { Injectable, Logger } from '@nestjs/common';
import OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import { Clock } from '../../common/time/clock';
import {
  jsonNestsDeeperThan,
  MAX_JSON_DEPTH,
  toStorableText,
} from '../../common/validation/untrusted-json';
import type { EngineConfig } from '../../config/engine.config';
import type { EmotionVocabulary } from '../../vocabularies/entities/emotion-vocabulary.entity';
import { detectEmotion, round } from './emotion-detector';
import { learnedFact } from '../../memory/dto/fact.dto';
import { tokensAtMost } from '../../spend/token-bound';
import { ReplyTextStream } from './reply-text-stream';
import { CircuitBreakers } from './routing/circuit-breakers';
import { EngineMetrics } from './routing/engine-metrics';
import { EngineRouter } from './routing/engine-router';
import { EngineRoutes } from './routing/engine-routes';
import { CutOffAnswer, UnusableAnswer } from './routing/retry-policy';
import {
  type EmotionReading,
  type EngineReply,
  type EngineTool,
  type EngineToolCall,
  MAX_LEARNED_FACTS,
  MAX_TOOL_CALLS_PER_ROUND,
  type ReplyRequest,
  type ResponseEngine,
  type TokenUsage,
} from './response-engine';
import { systemMessage, toolOutputMessage } from './system-message';

/**
 * More than any real call reports (contract §25): a provider, or a server posing as one, that
 * reports a figure above it counts no tokens at all, so counters cannot be inflated.
 */
export const MAX_TOKENS_PER_CALL = 10_000_000;
const usageLogger = new Logger('OpenAiResponseEngine');

/** An answer reported past ENGINE_MAX_TOKENS by this much was written by a provider ignoring it. */
const IGNORED_CAP_FACTOR = 1.25;

/**
 * A provider's reported count as a whole number ≥ 0; servers that omit one report 0, and so does
 * one that writes it as anything but a JSON number (`"1e6"` was read as a million: review).
 */
function tokenCount(value: unknown): number {
  if (typeof value !== 'number') return 0;
  const count = Math.trunc(value);
  return Number.isFinite(count) && count > 0 ? count : 0;
}

/**
 * What the provider reported; `prompt_tokens_details.cached_tokens` is absent on most servers.
 * A server that reports no usage (none, `{}`, or no prompt token: every real call has some) gets
 * `estimate` (the bytes of the call / 4), so budgets still hold with it; a warning says so, once
 * a process for each model.
 */
function usageOf(
  usage: CompletionUsage | null | undefined,
  model: string,
  estimate: () => TokenUsage,
): TokenUsage {
  if (typeof usage !== 'object' || usage === null || !(tokenCount(usage.prompt_tokens) > 0)) {
    // Bounded: a personality's model may be any name the routes let through.
    if (!modelsWithoutUsage.has(model) && modelsWithoutUsage.size < MODELS_WARNED_MAX) {
      modelsWithoutUsage.add(model);
      usageLogger.warn(
        `the model provider reported no token usage for ${model}: its calls count an estimate (the bytes of each call / 4)`,
      );
    }
    return estimate();
  }
  const promptTokens = tokenCount(usage.prompt_tokens);
  const counted = {
    promptTokens,
    completionTokens: tokenCount(usage.completion_tokens),
    // Cached tokens are some of the prompt's: never more than it (9,000,000 of 100 was counted).
    cachedTokens: Math.min(tokenCount(usage.prompt_tokens_details?.cached_tokens), promptTokens),
  };
  if (Object.values(counted).some((count) => count > MAX_TOKENS_PER_CALL)) {
    usageLogger.warn(
      `implausible token usage reported (${counted.promptTokens} prompt, ${counted.completionTokens} completion, ${counted.cachedTokens} cached): no tokens counted for this call`,
    );
    return { promptTokens: 0, completionTokens: 0, cachedTokens: 0 };
  }
  return counted;
}
const modelsWithoutUsage = new Set<string>();
const MODELS_WARNED_MAX = 100;

/**
 * The UTF-8 bytes of what a call sends: its messages' texts and tool calls, its tools'
 * definitions and the answer's schema. Not the bytes of the request's JSON: a quote is two there,
 * a control character six, and neither is text the model reads (found by review).
 */
function bytesSent({
  messages,
  tools,
  response_format,
}: Pick<Params, 'messages' | 'tools' | 'response_format'>): number {
  let bytes = 0;
  for (const message of messages) {
    const parts = typeof message.content === 'string' ? [message.content] : message.content;
    for (const part of parts ?? []) {
      if (typeof part === 'string') bytes += Buffer.byteLength(part);
      else if (part.type === 'text') bytes += Buffer.byteLength(part.text);
    }
    const calls = message.role === 'assistant' ? (message.tool_calls ?? []) : [];
    for (const call of calls) {
      if (call.type === 'function') {
        bytes += Buffer.byteLength(call.function.name) + Buffer.byteLength(call.function.arguments);
      }
    }
  }
  if (tools) bytes += Buffer.byteLength(JSON.stringify(tools));
  if (response_format) bytes += Buffer.byteLength(JSON.stringify(response_format));
  return bytes;
}

/**
 * Why a call has no count, which says how it is estimated:
 * - `not reported`: every call of a provider that reports no usage, the operator's choice of
 *   server, which a warning names: prompt and answer at about 4 bytes a token (English).
 * - `cut`: cut before its count came (its client left, its time ran out, a stream was cut for an
 *   answer that could not be used). The client writes its prompt and may choose the moment, so
 *   the prompt counts a token a byte, the bound admission reserved by (tokensAtMost): at bytes /
 *   4, a prompt of symbols or emoji, left each time once the provider had it, was counted at a
 *   quarter, and an end user's daily budget of 30,000 let 104,148 bytes of prompt through (found
 *   by review). Its answer counts a token a byte too, but no further than the cap the provider
 *   was sent, as admission reserved: uncapped, an English answer was counted four times its cost.
 * - `past the cap`: a stream cut for running past the cap it was sent: the prompt as for `cut`,
 *   the answer (the provider's doing, not the client's) at the English rate; a token a byte
 *   counted 16 times the cap and more.
 */
type Uncounted = 'not reported' | 'cut' | 'past the cap';

/** Tokens at about 4 UTF-8 bytes a token, English's rate. */
const typicalTokens = (bytes: number) => Math.ceil(bytes / 4);

/**
 * The estimate of a call's tokens, by why it has no count: its prompt (bytesSent) and its answer
 * (a text, or its bytes), which a `cut` call counts no further than `cap` (ENGINE_MAX_TOKENS).
 */
function estimatedUsage(
  params: Pick<Params, 'messages' | 'tools' | 'response_format'>,
  answered: string | number,
  why: Uncounted,
  cap = Infinity,
): TokenUsage {
  const prompt = bytesSent(params);
  const answer = typeof answered === 'number' ? answered : Buffer.byteLength(answered);
  return {
    promptTokens: why === 'not reported' ? typicalTokens(prompt) : tokensAtMost(prompt),
    completionTokens: why === 'cut' ? Math.min(tokensAtMost(answer), cap) : typicalTokens(answer),
    cachedTokens: 0,
  };
}

/** A tool call as its streamed pieces build it. */
interface StreamedCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * The call a streamed piece goes to (a position in `calls`, in the order calls first came), or
 * undefined for an answer that is no reply (an index that is not one, or more calls than a round
 * takes). By its `index` (OpenAI's API requires one; `slots` maps each to its call), but a piece
 * that starts another call goes to a new one: some compatible servers leave the index out, and
 * some send every call whole at index 0 (found by review: their streams merged the calls into
 * one, or failed with 502, where the same calls unstreamed were taken).
 */
function callOf(
  piece: { index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } },
  calls: StreamedCall[],
  slots: Map<unknown, number>,
): number | undefined {
  const { index } = piece;
  if (
    index !== undefined &&
    !(
      Number.isInteger(index) &&
      (index as number) >= 0 &&
      (index as number) < MAX_TOOL_CALLS_PER_ROUND
    )
  ) {
    return undefined;
  }
  const current = slots.get(index);
  if (current !== undefined && !startsAnother(piece, calls[current])) return current;
  if (calls.length >= MAX_TOOL_CALLS_PER_ROUND) return undefined;
  slots.set(index, calls.length);
  return calls.length;
}

/**
 * Whether a piece begins a call other than `call`: it names another id, or, naming none, it is a
 * whole call (a name and arguments) after one that had both.
 */
function startsAnother(
  piece: { id?: unknown; function?: { name?: unknown; arguments?: unknown } },
  call: StreamedCall,
): boolean {
  if (typeof piece.id === 'string' && piece.id !== '')
    return call.id !== '' && piece.id !== call.id;
  const named = typeof piece.function?.name === 'string' && piece.function.name !== '';
  return (
    named && piece.function?.arguments !== undefined && call.name !== '' && call.arguments !== ''
  );
}

/**
 * Asks for `{text, emotion, intensity, facts}` with the vocabulary's names as the only emotions
 * and at most MAX_LEARNED_FACTS facts.
 */
function responseFormat(emotions: string[]): ChatCompletionCreateParamsBase['response_format'] {
  return {
    type: 'json_schema',
    json_schema: {
      name: 'reply',
      strict: true,
      schema: {
        type: 'object',
        properties: {
          text: { type: 'string' },
          emotion: { type: 'string', enum: emotions },
          intensity: { type: 'number', minimum: 0, maximum: 1 },
          facts: { type: 'array', items: { type: 'string' }, maxItems: MAX_LEARNED_FACTS },
        },
        required: ['text', 'emotion', 'intensity', 'facts'],
        additionalProperties: false,
      },
    },
  };
}

/**
 * The facts the model learned: strings only, each one line of at most 200 characters
 * (learnedFact: a longer one is dropped, not cut), at most MAX_LEARNED_FACTS; anything else in
 * the field is ignored.
 */
function modelFacts(content: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    return [];
  }
  const facts = (parsed as { facts?: unknown } | null)?.facts;
  if (!Array.isArray(facts)) return [];
  return facts
    .filter((fact): fact is string => typeof fact === 'string')
    .map((fact) => learnedFact(toStorableText(fact)))
    .filter((fact): fact is string => fact !== undefined)
    .slice(0, MAX_LEARNED_FACTS);
}

/**
 * The emotion the model chose, if it is one of the vocabulary's and its intensity a number in
 * 0..1; otherwise null, and the local detector reads the reply instead.
 */
function modelEmotion(content: string, emotions: string[]): EmotionReading | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    return null;
  }
  const { emotion, intensity } = (parsed ?? {}) as { emotion?: unknown; intensity?: unknown };
  if (typeof emotion !== 'string' || !emotions.includes(emotion)) return null;
  if (typeof intensity !== 'number' || !(intensity >= 0 && intensity <= 1)) return null;
  return { name: emotion, intensity: round(intensity) };
}

/** One attempt's answer, before it is read for its emotion. */
interface Answer {
  content: string;
  text: string;
  usage: TokenUsage;
  /** The model called tools instead of answering. */
  toolCalls?: EngineToolCall[];
}

/**
 * Whether OpenAI's strict mode takes this schema: every object closed
 * (`additionalProperties: false`) with all its properties required, all the way down. A schema
 * that is not is sent without strict, and its arguments are checked by the service anyway.
 */
export function isStrictSchema(schema: unknown): boolean {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return true;
  const node = schema as Record<string, unknown>;
  if (node.type === 'object') {
    const properties = (node.properties ?? {}) as Record<string, unknown>;
    const required = Array.isArray(node.required) ? node.required : [];
    if (node.additionalProperties !== false) return false;
    if (Object.keys(properties).some((key) => !required.includes(key))) return false;
    if (!Object.values(properties).every(isStrictSchema)) return false;
  }
  return node.items === undefined || isStrictSchema(node.items);
}

function functionTools(tools: EngineTool[]): ChatCompletionTool[] {
  return tools.map((tool) => ({
    type: 'function',
    function: {
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      strict: isStrictSchema(tool.parameters),
    },
  }));
}

/** The reply's text in a whole answer's content: its `text` field, or the content when plain. */
function textOf(content: string): string {
  const text = new ReplyTextStream();
  text.push(content);
  return text.isPlain ? content.trim() : text.text;
}

/** The model's arguments: its JSON text parsed, else the text itself (which fails the schema). */
/** What a provider takes as a function's name in a message, as it takes a tool's. */
const PROVIDER_TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A call's name as the next round tells it back to the provider: a tool's as it is; one the
 * model made up for no tool (`lookup.order`, an empty one) with every other character as `_`, cut
 * at 64. OpenAI refuses a message naming a function otherwise (400), which ended the turn where
 * the model was to be told "no such tool" (found by review).
 */
function providerToolName(name: string): string {
  if (PROVIDER_TOOL_NAME.test(name)) return name;
  return name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || '_';
}

function parsedArguments(text: string): unknown {
  // Kept as text (which fails any tool's schema: the model is told) when it nests deeper than a
  // request body may: serialising it for the turn's jsonb overflowed the stack, a 500.
  if (jsonNestsDeeperThan(Buffer.from(text), MAX_JSON_DEPTH)) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

type Params = Omit<ChatCompletionCreateParamsBase, 'stream'>;

/**
 * Any OpenAI-compatible Chat Completions API (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp,
 * LM Studio) through the official SDK. The reply's emotion is asked for with a JSON-schema
 * response format; a provider that ignores it, or answers with something else, still gives a
 * reply, whose emotion the local detector reads. Which provider and model answer is the
 * router's (routing/engine-router.ts): the personality's model, then OPENAI_FALLBACKS, with
 * retries and a circuit breaker per route, all within the caller's time limit.
 */
@Injectable()
export class OpenAiResponseEngine implements ResponseEngine {
  readonly name = 'openai';
  private readonly router: EngineRouter;
  private readonly maxTokens: number;
  /**
   * The most characters of an answer read from a provider: ENGINE_MAX_TOKENS at a generous 16
   * characters a token, plus the JSON around the text. A provider that ignores
   * max_completion_tokens is cut off there instead of being read (and held) without end.
   */
  private readonly maxAnswerCharacters: number;
  /**
   * The routes (Route.key) whose provider wrote past max_completion_tokens: it ignores the field
   * (Ollama's and LM Studio's endpoints read only max_tokens), so this instance asks them with
   * max_tokens from then on, and the cap holds, and with it a spend budget's reservation (found
   * by review: 30 replies at once overshot a budget by 57 %). Bounded by the routes that exist:
   * the configured ones and the models personalities may name.
   */
  private readonly askedWithMaxTokens = new Set<string>();

  constructor(
    engine: EngineConfig,
    breakers: CircuitBreakers,
    metrics: EngineMetrics,
    clock: Clock,
  ) {
    const routes = new EngineRoutes(engine);
    for (const route of routes.configured()) {
      breakers.register(route);
      metrics.declare(this.name, route.model);
    }
    this.router = new EngineRouter(routes, breakers, metrics, clock, {
      engine: this.name,
      retries: engine.retries,
      timeoutMs: engine.timeoutMs,
    });
    this.maxTokens = engine.maxTokens;
    this.maxAnswerCharacters = engine.maxTokens * 16 + 4_096;
  }

  async reply(request: ReplyRequest): Promise<EngineReply> {
    const emotions = request.vocabulary.emotions.map((emotion) => emotion.name);
    const messages = this.messages(request, emotions);
    const format = responseFormat(emotions);
    let delivered = false;
    let deliveredBytes = 0;
    let askedModel: string | undefined;
    let waitingOnClient = false;
    let lastAttemptCounted = false;
    /** The budgets were asked since the last attempt (routes the breakers skip ask nothing more). */
    let roomAsked = false;
    const onDelta =
      request.onDelta &&
      (async (text: string) => {
        delivered = true;
        deliveredBytes += Buffer.byteLength(text);
        waitingOnClient = true;
        try {
          await request.onDelta!(text);
        } finally {
          waitingOnClient = false;
        }
      });
    const tools = request.tools?.length ? functionTools(request.tools) : undefined;
    try {
      const { value, route } = await this.router.run(
        request.personality.model,
        request.signal,
        { delivered: () => delivered, waitingOnClient: () => waitingOnClient },
        async (route, signal) => {
          askedModel = route.model;
          // max_completion_tokens, not the deprecated max_tokens that OpenAI's reasoning models
          // refuse (docs/engines.md: which servers honour it), but to a route that ignored it.
          const params: Params = {
            model: route.model,
            messages,
            response_format: format,
            ...(this.askedWithMaxTokens.has(route.key)
              ? // eslint-disable-next-line @typescript-eslint/no-deprecated -- the servers that ignore its successor read only it
                { max_tokens: this.maxTokens }
              : { max_completion_tokens: this.maxTokens }),
            ...(tools ? { tools } : {}),
          };
          lastAttemptCounted = false;
          roomAsked = false;
          // Cancelled before it began (the client left while the route was admitted), the SDK
          // sends nothing: no prompt to count.
          const sent = !signal.aborted;
          try {
            const answer = onDelta
              ? await this.streamed(route.client, params, signal, onDelta)
              : await this.whole(route.client, params, signal);
            // Clearly past it: a count a little off the cap is no sign, and a route asked with
            // max_tokens that needs max_completion_tokens (OpenAI's reasoning models) fails.
            if (answer.usage.completionTokens > this.maxTokens * IGNORED_CAP_FACTOR) {
              this.askedWithMaxTokens.add(route.key);
            }
            // Calls of tools not offered (a server that makes them anyway) are no answer: the
            // text alone is, and an empty one is no reply.
            const offered = tools ? answer : { ...answer, toolCalls: undefined };
            return this.toReply(offered, request.message, request.vocabulary, emotions);
          } catch (error) {
            // An answer that came and cannot be used was billed all the same: counted, whether
            // the next route answers or not, or a message the model refuses would cost nothing.
            if (error instanceof UnusableAnswer && error.pastTheCap) {
              this.askedWithMaxTokens.add(route.key);
            }
            if (error instanceof UnusableAnswer && error.spent) {
              request.onUncountedSpend?.(error.spent, route.model);
              lastAttemptCounted = true;
            } else if (sent && signal.aborted && !delivered) {
              // Cancelled (the client left, the time ran out) before any of it came: the
              // provider has read the prompt, and bills it, or a client leaving each request
              // before its answer would spend the organization's tokens past every budget.
              request.onUncountedSpend?.(estimatedUsage(params, 0, 'cut'), route.model);
              lastAttemptCounted = true;
            }
            throw error;
          }
        },
        // The next route is asked the same prompt: after an answer that was billed, the budgets
        // are asked again first, or each route's refusal spent a whole reply's estimate more than
        // the reply reserved (three routes overshot a budget by 86 %, found by review).
        async () => {
          if (!lastAttemptCounted || roomAsked) return;
          roomAsked = true;
          await request.roomForAnotherCall?.();
        },
      );
      return { ...value, model: route.model };
    } catch (error) {
      // The client read part of an answer whose count never came: counted by estimate, or a
      // client leaving just before the stream's last chunk would be served for nothing.
      if (delivered && askedModel && !lastAttemptCounted) {
        request.onUncountedSpend?.(
          estimatedUsage(
            { messages, tools, response_format: format },
            deliveredBytes,
            'cut',
            this.maxTokens,
          ),
          askedModel,
        );
      }
      throw error;
    }
  }

  private messages(request: ReplyRequest, emotions: string[]): ChatCompletionMessageParam[] {
    return [
      {
        role: 'system',
        content: systemMessage(
          request.personality,
          emotions,
          request.facts,
          request.recalled,
          request.crisis,
          request.knowledge,
        ),
      },
      ...request.memories.map((memory): ChatCompletionMessageParam =>
        memory.role === 'user'
          ? { role: 'user', content: memory.content }
          : { role: 'assistant', content: memory.content },
      ),
      { role: 'user', content: request.message },
      // The turn's earlier calls, each as the model's call and the tool's answer.
      ...(request.toolResults ?? []).flatMap(
        ({ call, output, said }): ChatCompletionMessageParam[] => [
          {
            role: 'assistant',
            content: said ?? null,
            tool_calls: [
              {
                id: call.id,
                type: 'function',
                function: {
                  name: providerToolName(call.name),
                  arguments: JSON.stringify(call.arguments),
                },
              },
            ],
          },
          { role: 'tool', tool_call_id: call.id, content: toolOutputMessage(output) },
        ],
      ),
    ];
  }

  private async whole(client: OpenAI, params: Params, signal: AbortSignal): Promise<Answer> {
    const completion: unknown = await client.chat.completions.create(
      { ...params, stream: false },
      { signal },
    );
    // A server may answer 200 with anything: only a completion's content is a reply.
    const { choices, usage } = (completion ?? {}) as Partial<ChatCompletion>;
    const message = Array.isArray(choices) ? choices[0]?.message : undefined;
    const content = message?.content;
    const calls = Array.isArray(message?.tool_calls) ? message.tool_calls : [];
    const toolCalls = calls.flatMap((call): EngineToolCall[] =>
      call?.type === 'function' && typeof call.function?.name === 'string'
        ? [
            {
              id: String(call.id),
              name: call.function.name,
              arguments: parsedArguments(String(call.function.arguments ?? '')),
            },
          ]
        : [],
    );
    const counted = () =>
      usageOf(usage, params.model, () =>
        estimatedUsage(
          params,
          String(content ?? '') + String(message?.refusal ?? '') + JSON.stringify(calls),
          'not reported',
        ),
      );
    if (typeof content === 'string') this.checkLength(content.length, counted);
    if (calls.length > MAX_TOOL_CALLS_PER_ROUND) {
      throw new UnusableAnswer(
        'The model provider answered with something that is not a reply',
        counted(),
      );
    }
    if (toolCalls.length > 0) {
      // What the model wrote beside its calls is said to the end user, as it is when streamed.
      return {
        // Kept: a reply taken without its calls (no tools were offered) reads its facts and
        // emotion from it.
        content: typeof content === 'string' ? content : '',
        text: typeof content === 'string' ? textOf(content) : '',
        usage: counted(),
        toolCalls,
      };
    }
    if (typeof content !== 'string') {
      // A completion without a text (a refusal, a content filter's null) was billed; a body
      // that is no completion may not have been.
      throw new UnusableAnswer(
        typeof message?.refusal === 'string'
          ? 'The model refused to answer'
          : 'The model provider answered with something that is not a reply',
        Array.isArray(choices) ? counted() : undefined,
      );
    }
    return { content, text: textOf(content), usage: counted() };
  }

  private async streamed(
    client: OpenAI,
    params: Params,
    signal: AbortSignal,
    onDelta: (text: string) => Promise<void>,
  ): Promise<Answer> {
    const stream = await client.chat.completions.create(
      { ...params, stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    const text = new ReplyTextStream();
    let content = '';
    let reported: CompletionUsage | undefined;
    let finished = false;
    let refusal = '';
    // Tool calls come in pieces by index: the id and name first, then the arguments' text.
    const calls: StreamedCall[] = [];
    // The call each index (or none) writes to now, in the order they first came.
    const slots = new Map<unknown, number>();
    // Text, refusal and calls count against one bound together.
    let read = 0;
    const take = (piece: string) => {
      read += piece.length;
      this.checkLength(read, () =>
        estimatedUsage(params, content + refusal + JSON.stringify(calls) + piece, 'past the cap'),
      );
      return piece;
    };
    for await (const chunk of stream) {
      const choice = Array.isArray(chunk?.choices) ? chunk.choices[0] : undefined;
      if (choice?.finish_reason) finished = true;
      if (typeof choice?.delta?.refusal === 'string') refusal += take(choice.delta.refusal);
      for (const piece of choice?.delta?.tool_calls ?? []) {
        const at = callOf(piece, calls, slots);
        if (at === undefined) {
          throw new UnusableAnswer(
            'The model provider answered with something that is not a reply',
            estimatedUsage(
              params,
              content + refusal + JSON.stringify(calls),
              'cut',
              this.maxTokens,
            ),
          );
        }
        const call = (calls[at] ??= { id: '', name: '', arguments: '' });
        if (piece.id) call.id = piece.id;
        if (piece.function?.name) call.name += take(piece.function.name);
        if (piece.function?.arguments) call.arguments += take(piece.function.arguments);
      }
      const piece = choice?.delta?.content;
      if (typeof piece === 'string' && piece !== '') {
        content += take(piece);
        const delta = toStorableText(text.push(piece));
        // Awaited: a client that does not read pauses this read of the provider's stream.
        if (delta) await onDelta(delta);
      }
      if (chunk?.usage) reported = chunk.usage;
    }
    // A connection that drops can end the stream quietly: without a finish reason, it is cut off
    // (the transport's failure). A stream that finished is the model's answer, whatever it holds.
    if (!finished) throw new CutOffAnswer();
    const usage = usageOf(reported, params.model, () =>
      estimatedUsage(params, content + refusal + JSON.stringify(calls), 'not reported'),
    );
    const toolCalls = calls
      .filter((call) => call && call.name !== '')
      .map((call) => ({ ...call, arguments: parsedArguments(call.arguments) }));
    if (toolCalls.length > 0) return { content, text: text.text, usage, toolCalls };
    if (refusal !== '' && content === '') {
      throw new UnusableAnswer('The model refused to answer', usage);
    }
    return { content, text: text.text, usage };
  }

  /** Leaving the stream's loop by this throw closes the provider's response. */
  private checkLength(characters: number, spent: () => TokenUsage): void {
    if (characters > this.maxAnswerCharacters) {
      throw new UnusableAnswer(
        'The model provider answered past ENGINE_MAX_TOKENS (max_completion_tokens ignored)',
        spent(),
        true,
      );
    }
  }

  private toReply(
    answer: Answer,
    message: string,
    vocabulary: EmotionVocabulary,
    emotions: string[],
  ): Omit<EngineReply, 'model'> {
    const detected = detectEmotion(message, vocabulary.emotions);
    if (answer.toolCalls) {
      return {
        text: toStorableText(answer.text),
        emotion: { name: detected.name, intensity: detected.intensity },
        detected: { name: detected.name, intensity: detected.intensity },
        usage: answer.usage,
        facts: [],
        toolCalls: answer.toolCalls,
      };
    }
    // The model's text is stored: a NUL or a lone surrogate in it must not fail the insert.
    const text = toStorableText(answer.text);
    if (text.trim() === '') {
      throw new UnusableAnswer('The model provider answered with no reply', answer.usage);
    }
    const fallback = detectEmotion(text, vocabulary.emotions);
    return {
      text,
      emotion: modelEmotion(answer.content, emotions) ?? {
        name: fallback.name,
        intensity: fallback.intensity,
      },
      detected: { name: detected.name, intensity: detected.intensity },
      usage: answer.usage,
      facts: modelFacts(answer.content),
    };
  }
}
