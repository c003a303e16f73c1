import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import OpenAI from 'openai';
import type {
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import { AppError } from '../../common/errors/app-error';
import { toStorableText } from '../../common/validation/untrusted-json';
import type { EngineConfig } from '../../config/engine.config';
import type { PersonalityForReply } from '../../personalities/personalities.service';
import type { EmotionVocabulary } from '../../vocabularies/entities/emotion-vocabulary.entity';
import { detectEmotion, round } from './emotion-detector';
import { ReplyTextStream } from './reply-text-stream';
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

/**
 * Any OpenAI-compatible Chat Completions API (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp,
 * LM Studio) through the official SDK. The reply's emotion is asked for with a JSON-schema
 * response format; a provider that ignores it, or answers with something else, still gives a
 * reply, whose emotion the local detector reads. No retries here: the caller's time limit covers
 * the whole reply, and a client retries with its Idempotency-Key.
 */
@Injectable()
export class OpenAiResponseEngine implements ResponseEngine {
  readonly name = 'openai';
  private readonly client: OpenAI;
  private readonly defaultModel: string;

  constructor(config: ConfigService) {
    const engine = config.getOrThrow<EngineConfig>('engine');
    this.client = new OpenAI({
      apiKey: engine.openaiApiKey,
      baseURL: engine.openaiBaseUrl,
      maxRetries: 0,
      timeout: engine.timeoutMs,
    });
    this.defaultModel = engine.openaiModel;
  }

  async reply(request: ReplyRequest): Promise<EngineReply> {
    const emotions = request.vocabulary.emotions.map((emotion) => emotion.name);
    const params = {
      model: request.personality.model ?? this.defaultModel,
      messages: this.messages(request, emotions),
      response_format: responseFormat(emotions),
    };
    try {
      const answer = request.onDelta
        ? await this.streamed(params, request)
        : await this.whole(params, request.signal);
      return {
        ...this.toReply(answer, request.message, request.vocabulary, emotions),
        model: params.model,
      };
    } catch (error) {
      if (request.signal.aborted) throw request.signal.reason;
      throw this.unavailable(error);
    }
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

  private async whole(
    params: Omit<ChatCompletionCreateParamsBase, 'stream'>,
    signal: AbortSignal,
  ): Promise<{ content: string; text: string; usage: TokenUsage }> {
    const completion = await this.client.chat.completions.create(
      { ...params, stream: false },
      { signal },
    );
    const content = completion.choices[0]?.message?.content ?? '';
    const text = new ReplyTextStream();
    text.push(content);
    return {
      content,
      text: text.isPlain ? content.trim() : text.text,
      usage: usageOf(completion.usage),
    };
  }

  private async streamed(
    params: Omit<ChatCompletionCreateParamsBase, 'stream'>,
    request: ReplyRequest,
  ): Promise<{ content: string; text: string; usage: TokenUsage }> {
    const stream = await this.client.chat.completions.create(
      { ...params, stream: true, stream_options: { include_usage: true } },
      { signal: request.signal },
    );
    const text = new ReplyTextStream();
    let content = '';
    let usage: TokenUsage = usageOf(undefined);
    let finished = false;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.finish_reason) finished = true;
      const piece = chunk.choices[0]?.delta?.content ?? '';
      if (piece) {
        content += piece;
        const delta = toStorableText(text.push(piece));
        if (delta) request.onDelta?.(delta);
      }
      if (chunk.usage) usage = usageOf(chunk.usage);
    }
    // A connection that drops can end the stream quietly: without a finish reason, it is cut off.
    if (!finished) {
      throw new AppError('engine_unavailable', 'The model provider broke off its answer');
    }
    return { content, text: text.text, usage };
  }

  private toReply(
    answer: { content: string; text: string; usage: TokenUsage },
    message: string,
    vocabulary: EmotionVocabulary,
    emotions: string[],
  ): Omit<EngineReply, 'model'> {
    // The model's text is stored: a NUL or a lone surrogate in it must not fail the insert.
    const text = toStorableText(answer.text);
    if (text.trim() === '') {
      throw new AppError('engine_unavailable', 'The model provider answered with no reply');
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

  private unavailable(error: unknown): AppError {
    if (error instanceof AppError) return error;
    // The SDK's APIError carries the provider's HTTP status; connection errors have none.
    const status = (error as { status?: unknown } | null)?.status;
    return new AppError(
      'engine_unavailable',
      typeof status === 'number'
        ? `The model provider failed (HTTP ${status})`
        : 'The model provider could not be reached or broke off its answer',
    );
  }
}
