import { Clock } from '../common/time/clock';
import type { ToolsConfig } from '../config/tools.config';
import type { WebhooksConfig } from '../config/webhooks.config';
import type { ToolTurnsRepository } from './tool-turns.repository';
import { toolCallEventId, WebhookToolCaller } from './webhook-tool-caller';

describe('toolCallEventId', () => {
  const id = toolCallEventId('turn_01', 2, 'book', { at: '9:00', n: 1 }, 0);

  it('is an event id, the same for the same call asked again, its keys in any order', () => {
    expect(id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(toolCallEventId('turn_01', 2, 'book', { at: '9:00', n: 1 }, 0)).toBe(id);
    expect(toolCallEventId('turn_01', 2, 'book', { n: 1, at: '9:00' }, 0)).toBe(id);
  });

  it('differs for another turn, round, tool, arguments or occurrence of alike calls', () => {
    const others = [
      toolCallEventId('turn_02', 2, 'book', { at: '9:00', n: 1 }, 0),
      toolCallEventId('turn_01', 3, 'book', { at: '9:00', n: 1 }, 0),
      toolCallEventId('turn_01', 2, 'cancel', { at: '9:00', n: 1 }, 0),
      toolCallEventId('turn_01', 2, 'book', { at: '10:00', n: 1 }, 0),
      toolCallEventId('turn_01', 2, 'book', { at: '9:00', n: 1 }, 1),
    ];
    expect(new Set([id, ...others]).size).toBe(others.length + 1);
  });
});

describe('WebhookToolCaller: calls in flight', () => {
  /** Endpoint lookups held until released: each call is in flight until then. */
  const held: Array<() => void> = [];
  const repository = {
    findEndpoint: () => new Promise<undefined>((resolve) => held.push(() => resolve(undefined))),
  } as unknown as ToolTurnsRepository;
  const caller = new WebhookToolCaller(
    repository,
    new Clock(),
    { callsInFlightPerOrganization: 16, callsInFlight: 2 } as ToolsConfig,
    {} as WebhooksConfig,
  );
  const callOf = (organizationId: string, userId: string) =>
    caller.call({
      eventId: 'evt_0',
      organizationId,
      endpointId: 'endpoint',
      signal: new AbortController().signal,
      data: {
        tool_call_id: 'call_1',
        name: 'book',
        arguments: {},
        user_id: userId,
        personality_id: 'personality',
        turn_id: 'turn_01',
      },
    });

  it('refuses a call past TOOL_CALLS_IN_FLIGHT, every organization together, until one ends', async () => {
    const running = [callOf('org-a', 'ann'), callOf('org-b', 'bob')];
    // A third organization, its first call: the instance's two are taken (review: each new
    // sign-up had 16 more).
    expect(await callOf('org-c', 'cat')).toEqual({
      output: { error: 'too many tool calls in flight for this instance' },
      error: 'too many tool calls in flight for this instance',
      durationMs: null,
      throttled: true,
    });
    held.shift()!();
    expect(await running[0]).toMatchObject({ error: 'the endpoint no longer exists' });
    const next = callOf('org-c', 'cat');
    expect(held).toHaveLength(2);
    for (const release of held.splice(0)) release();
    expect(await next).toMatchObject({ error: 'the endpoint no longer exists' });
    await running[1];
  });
});
