import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PersonalityApiError, type RespondStreamEvent } from '@personality-api/client';
import { newPersonality, newTenant, uniqueUserId, withoutOutputModeration } from './support.js';

/**
 * The harness has told the service's model provider to fail the next reply after a few pieces
 * (test/typescript-client.e2e-spec.ts): this file's one streamed call gets it.
 */
describe('respondStream when the reply fails after it started', () => {
  it('yields the deltas so far, then an error event with the envelope as PersonalityApiError', async () => {
    const tenant = await newTenant();
    await withoutOutputModeration(tenant);
    const personalityId = await newPersonality(tenant.api);
    const events: RespondStreamEvent[] = [];
    for await (const event of tenant.api.respondStream({
      personality_id: personalityId,
      user_id: uniqueUserId('broken'),
      message: 'go on',
    })) {
      events.push(event);
    }
    assert.ok(events.some((event) => event.type === 'delta'));
    assert.ok(!events.some((event) => event.type === 'done'));
    const last = events.at(-1);
    assert.equal(last?.type, 'error');
    if (last?.type !== 'error') return;
    assert.ok(last.error instanceof PersonalityApiError);
    assert.equal(last.error.status, 502);
    assert.equal(last.error.code, 'engine_unavailable');
    assert.match(last.error.requestId ?? '', /^[0-9A-HJKMNP-TV-Z]{26}$/);
  });
});
