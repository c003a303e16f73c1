import { sha256 } from '../common/crypto/sha256';

/**
 * The routes whose stored answer carries an end user's data (metadata, a conversation, facts,
 * an import's user): the answer is stored with its `subject`, the SHA-256 of the end user's
 * `user_id`, so that the erasure of that end user (and the deletion of one of their memories)
 * deletes it (contract §25). Keyed by method and Express route template, like replay-secrets.ts;
 * a new route that answers an end user's data adds its line here.
 */
const END_USER_DATA_ROUTES: ReadonlySet<string> = new Set([
  'POST /v1/end-users',
  'POST /v1/end-users/import',
  'POST /v1/end-users/:user_id/facts',
  'POST /v1/respond',
  'POST /v1/respond/turns/:turn_id/tool-outputs',
]);

/**
 * The routes answering a reply of the personality named by the body's `personality_id`: the key
 * is about that personality from its claim, so that its deletion forgets the answer. A resumed
 * turn's key learns its personality from the turn (IdempotencyService.aboutTurn).
 */
const REPLY_ROUTES: ReadonlySet<string> = new Set(['POST /v1/respond']);

/** The reply's personality, from the body before validation: a hint (IdempotencyService.begin). */
export function personalityOfReply(
  method: string,
  routeTemplate: string | undefined,
  body: unknown,
): string | undefined {
  if (routeTemplate === undefined || !REPLY_ROUTES.has(`${method} ${routeTemplate}`)) return;
  const id = (body as { personality_id?: unknown } | undefined)?.personality_id;
  return typeof id === 'string' ? id : undefined;
}

export function carriesEndUserData(method: string, routeTemplate: string | undefined): boolean {
  return routeTemplate !== undefined && END_USER_DATA_ROUTES.has(`${method} ${routeTemplate}`);
}

/** The `subject` of an end user's stored answers: not their user_id itself (often an address). */
export function endUserSubject(userId: string): Buffer {
  return sha256(`end_user:${userId}`);
}

/** The end user an answer is about: its own `user_id`, else the request's (path, then body). */
export function endUserOfAnswer(answer: unknown, hint: string | undefined): string | undefined {
  const own = (answer as { user_id?: unknown } | null)?.user_id;
  return typeof own === 'string' ? own : hint;
}
