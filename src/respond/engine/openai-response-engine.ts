import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import { Clock } from '../../common/time/clock';
import { toStorableText } from '../../common/validation/untrusted-json';
import type { EngineConfig } from '../../config/engine.config';
import type { PersonalityForReply } from '../../personalities/personalities.service';
import type { EmotionVocabulary } from '../../vocabularies/entities/emotion-vocabulary.entity';
import { detectEmotion, round } from './emotion-detector';
import { ReplyTextStream } from './reply-text-stream';
import { CircuitBreakers } from './routing/circuit-breakers';
import { EngineMetrics } from './routing/engine-metrics';
import { EngineRouter } from './routing/engine-router';
import { EngineRoutes } from './routing/engine-routes';
import { UnusableAnswer } from './routing/retry-policy';
import type {
  EmotionReading,
  EngineReply,
  ReplyRequest,
  ResponseEngine,
  TokenUsage,
} from './response-engine';

/** A provider's reported count as a whole number ≥ 0; servers that omit one report 0. */
function tokenCount(value: unknown): number {
  const count = Math.trunc(Number(value));
  return Number.isFinite(count) && count > 0 ? count : 0;
}

/** What the provider reported; `prompt_tokens_details.cached_tokens` is absent on most servers. */
function usageOf(usage: CompletionUsage | null | undefined): TokenUsage {
  return {
    promptTokens: tokenCount(usage?.prompt_tokens),
    completionTokens: tokenCount(usage?.completion_tokens),
    cachedTokens: tokenCount(usage?.prompt_tokens_details?.cached_tokens),
  };
}

/** The system message: who the personality is, and how to answer. */
export function systemMessage(personality: PersonalityForReply, emotions: string[]): string {
  const { voice } = personality;
  return [
    `You are ${personality.name}. ${personality.description}`,
    `Traits: ${personality.traits.join(', ')}.`,
    `Voice: ${voice.tone}; ${voice.formality} register. ${voice.style_notes}`,
    personality.systemPrompt,
    'Answer with a JSON object: "text" is your reply to the user; "emotion" is the emotion your ' +
      `reply expresses, one of: ${emotions.join(', ')}; "intensity" is how strongly, from 0 to 1.`,
  ].join('\n\n');
}

/** Asks for `{text, emotion, intensity}` with the vocabulary's names as the only emotions. */
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
        },
        required: ['text', 'emotion', 'intensity'],
        additionalProperties: false,
      },
    },
  };
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

  constructor(
    config: ConfigService,
    breakers: CircuitBreakers,
    metrics: EngineMetrics,
    clock: Clock,
  ) {
    const engine = config.getOrThrow<EngineConfig>('engine');
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
  }

  async reply(request: ReplyRequest): Promise<EngineReply> {
    const emotions = request.vocabulary.emotions.map((emotion) => emotion.name);
    const messages = this.messages(request, emotions);
    const format = responseFormat(emotions);
    let delivered = false;
    const onDelta =
      request.onDelta &&
      ((text: string) => {
        delivered = true;
        request.onDelta!(text);
      });
    const { value, route } = await this.router.run(
      request.personality.model,
      request.signal,
      () => delivered,
      async (route, signal) => {
        // max_completion_tokens, not the deprecated max_tokens that OpenAI's reasoning models
        // refuse (docs/engines.md: which servers honour it).
        const params: Params = {
          model: route.model,
          messages,
          response_format: format,
          max_completion_tokens: this.maxTokens,
        };
        const answer = onDelta
          ? await this.streamed(route.client, params, signal, onDelta)
          : await this.whole(route.client, params, signal);
        return this.toReply(answer, request.message, request.vocabulary, emotions);
      },
    );
    return { ...value, model: route.model };
  }

  private messages(request: ReplyRequest, emotions: string[]): ChatCompletionMessageParam[] {
    return [
      { role: 'system', content: systemMessage(request.personality, emotions) },
      ...request.memories.map((memory): ChatCompletionMessageParam =>
        memory.role === 'user'
          ? { role: 'user', content: memory.content }
          : { role: 'assistant', content: memory.content },
      ),
      { role: 'user', content: request.message },
    ];
  }

  private async whole(client: OpenAI, params: Params, signal: AbortSignal): Promise<Answer> {
    const completion: unknown = await client.chat.completions.create(
      { ...params, stream: false },
      { signal },
    );
    // A server may answer 200 with anything: only a completion's content is a reply.
    const { choices, usage } = (completion ?? {}) as Partial<ChatCompletion>;
    const content = Array.isArray(choices) ? choices[0]?.message?.content : undefined;
    if (typeof content !== 'string') {
      throw new UnusableAnswer(
        'The model provider answered with something that is not a reply',
        false,
      );
    }
    const text = new ReplyTextStream();
    text.push(content);
    return { content, text: text.isPlain ? content.trim() : text.text, usage: usageOf(usage) };
  }

  private async streamed(
    client: OpenAI,
    params: Params,
    signal: AbortSignal,
    onDelta: (text: string) => void,
  ): Promise<Answer> {
    const stream = await client.chat.completions.create(
      { ...params, stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    const text = new ReplyTextStream();
    let content = '';
    let usage: TokenUsage = usageOf(undefined);
    let finished = false;
    for await (const chunk of stream) {
      const choice = Array.isArray(chunk?.choices) ? chunk.choices[0] : undefined;
      if (choice?.finish_reason) finished = true;
      const piece = choice?.delta?.content;
      if (typeof piece === 'string' && piece !== '') {
        content += piece;
        const delta = toStorableText(text.push(piece));
        if (delta) onDelta(delta);
      }
      if (chunk?.usage) usage = usageOf(chunk.usage);
    }
    // A connection that drops can end the stream quietly: without a finish reason, it is cut off.
    if (!finished) throw new UnusableAnswer('The model provider broke off its answer', true);
    return { content, text: text.text, usage };
  }

  private toReply(
    answer: Answer,
    message: string,
    vocabulary: EmotionVocabulary,
    emotions: string[],
  ): Omit<EngineReply, 'model'> {
    // The model's text is stored: a NUL or a lone surrogate in it must not fail the insert.
    const text = toStorableText(answer.text);
    if (text.trim() === '') {
      throw new UnusableAnswer('The model provider answered with no reply', false);
    }
    const fallback = detectEmotion(text, vocabulary.emotions);
    const detected = detectEmotion(message, vocabulary.emotions);
    return {
      text,
      emotion: modelEmotion(answer.content, emotions) ?? {
        name: fallback.name,
        intensity: fallback.intensity,
      },
      detected: { name: detected.name, intensity: detected.intensity },
      usage: answer.usage,
    };
  }
}
