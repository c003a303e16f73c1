import type { EmotionVocabulary } from '../../vocabularies/entities/emotion-vocabulary.entity';
import type { PersonalityReplies } from '../../personalities/entities/personality-definition';

/** Injection token of the engine that writes replies; bind another class to replace the default. */
export const RESPONSE_ENGINE = Symbol('RESPONSE_ENGINE');

export interface EngineMemory {
  role: 'user' | 'personality';
  content: string;
  emotion: string | null;
}

export interface ReplyRequest {
  personality: { id: string; name: string; replies: PersonalityReplies };
  message: string;
  /** The latest exchanges of this user with this personality, oldest first. */
  memories: EngineMemory[];
  vocabulary: EmotionVocabulary;
}

export interface EngineReply {
  text: string;
  emotion: { name: string; intensity: number };
  /** The emotion detected in the user's message, stored with it. */
  detected: { name: string; intensity: number };
}

export interface ResponseEngine {
  reply(request: ReplyRequest): Promise<EngineReply>;
}
