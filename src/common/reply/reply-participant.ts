import { DiscoveryService } from '@nestjs/core';

/** Who a reply answers and to what: known before any participant reads. */
export interface ReplyTurn {
  organizationId: string;
  personalityId: string;
  /** The organization's id of the end user, who may not exist yet (created on first contact). */
  userId: string;
  message: string;
}

/** The end user as a reply needs them: found by the participant that reads their memories. */
export interface ReplyEndUser {
  id: string;
  organization_id: string;
  user_id: string;
  status: 'active' | 'deleting';
}

/** A message of the conversation so far, oldest first. */
export interface ReplyHistoryMessage {
  role: 'user' | 'personality';
  content: string;
  emotion: string | null;
}

/** An older message recalled for this one, with when it was said (ISO 8601). */
export interface ReplyRecalledMessage {
  role: 'user' | 'personality';
  content: string;
  created_at: string;
}

/** A passage of one of the organization's documents, cited by the answer. */
export interface ReplyKnowledgeChunk {
  document_id: string;
  title: string;
  chunk_index: number;
  text: string;
}

/**
 * What the participants read for a reply before anything is written or asked of the engine,
 * merged. Each field has exactly one participant that writes it (checked at start-up); a field
 * its participant leaves out is empty.
 */
export interface ReplyContext {
  /** The end user, when the participant that reads their memories found them (one round trip). */
  endUser?: ReplyEndUser;
  history: ReplyHistoryMessage[];
  facts: string[];
  recalled: ReplyRecalledMessage[];
  knowledge: ReplyKnowledgeChunk[];
}

export type ReplyContextField = keyof ReplyContext;

/** Every field of ReplyContext: the reply needs a participant for each. */
export const REPLY_CONTEXT_FIELDS: readonly ReplyContextField[] = [
  'endUser',
  'history',
  'facts',
  'recalled',
  'knowledge',
];

export type ReplyContribution = Partial<ReplyContext>;

/**
 * A module's part in every reply's reads (docs/decisions.md, "Code"): called once per reply, in
 * parallel with the other participants and the personality's read, before the end user is
 * created or the budgets admit the reply. It must read only the turn's organization.
 */
export interface ReplyParticipant {
  readReplyContext(turn: ReplyTurn): Promise<ReplyContribution>;
}

const Discoverable = DiscoveryService.createDecorator<readonly ReplyContextField[]>();

/**
 * Marks a singleton provider as the reply participant that writes these fields of ReplyContext;
 * ReplyParticipants finds it in whichever module provides it, so the reply needs no list of
 * features. Only the fields named here are taken from what it answers.
 */
export function ReadsForReplies(
  ...fields: [ReplyContextField, ...ReplyContextField[]]
): <T extends new (...args: never[]) => ReplyParticipant>(target: T) => void {
  return (target) => Discoverable(fields)(target);
}
ReadsForReplies.KEY = Discoverable.KEY;
