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

/**
 * Imports (PMF v1, `POST /v1/end-users/import`) an end user of the personality whose memories are
 * `contents`, oldest first, a day apart, the user's and the personality's in turn.
 */
export async function importConversation(
  t: HttpTarget,
  auth: string,
  personalityId: string,
  userId: string,
  contents: string[],
): Promise<void> {
  const p = (await t.http().get(`/v1/personalities/${personalityId}`).set('Authorization', auth))
    .body as Record<string, unknown>;
  const start = Date.now() - (contents.length + 1) * 86_400_000;
  const iso = (i: number) => new Date(start + i * 86_400_000).toISOString();
  const response = await t
    .http()
    .post('/v1/end-users/import')
    .set('Authorization', auth)
    .send({
      format: 'pmf',
      version: 1,
      exported_at: new Date().toISOString(),
      end_user: {
        user_id: userId,
        metadata: {},
        status: 'active',
        created_at: iso(0),
        updated_at: iso(0),
      },
      personalities: [
        {
          id: p.id,
          source_slug: p.source_slug,
          source_version: p.source_version,
          name: p.name,
          description: p.description,
          traits: p.traits,
          voice: p.voice,
          system_prompt: p.system_prompt,
          language: p.language,
          replies: p.replies,
        },
      ],
      relationships: [],
      memories: contents.map((content, i) => ({
        id: String(i + 1),
        personality_id: p.id,
        role: i % 2 === 0 ? 'user' : 'personality',
        content,
        emotion: null,
        vocabulary_version: null,
        created_at: iso(i),
      })),
      facts: [],
    });
  if (response.status !== 201)
    throw new Error(`import failed: ${response.status} ${JSON.stringify(response.body)}`);
}
