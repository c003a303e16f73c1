import { randomUUID } from 'node:crypto';
import type { HttpTarget } from './test-app';

/** A user_id no other test uses. */
export function uniqueUserId(tag = 'eu'): string {
  return `${tag}-${randomUUID()}`;
}

/** Clones a catalog entry into the caller's organization; answers the personality id. */
export async function clonePersonality(t: HttpTarget, auth: string, slug = 'sage-mentor') {
  const response = await t
    .http()
    .post('/v1/personalities/from-catalog')
    .set('Authorization', auth)
    .send({ slug });
  if (response.status !== 201)
    throw new Error(`clone failed: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.id as string;
}

export function respond(
  t: HttpTarget,
  auth: string,
  body: { personality_id: string; user_id: string; message: string },
) {
  return t.http().post('/v1/respond').set('Authorization', auth).send(body);
}
