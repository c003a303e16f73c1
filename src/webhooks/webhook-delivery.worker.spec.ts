import { backoffMs, eventBody } from './webhook-delivery.worker';

describe('webhook delivery', () => {
  it('waits the base, then twice as long after each failed attempt, with at most 10 % jitter', () => {
    expect([1, 2, 3, 4].map((attempt) => backoffMs(attempt, 5_000, 0))).toEqual([
      5_000, 10_000, 20_000, 40_000,
    ]);
    expect(backoffMs(3, 5_000, 1)).toBe(22_000);
    expect(backoffMs(60, 86_400_000, 0)).toBe(7 * 86_400_000);
  });

  it('sends the contract body: {id: evt_…, type, created_at, organization_id, data}', () => {
    const body = eventBody({
      event_id: '2f1c0d7e-9a8b-4c3d-8e7f-6a5b4c3d2e1f',
      event_type: 'end_user.deleted',
      event_created_at: new Date('2026-11-22T01:23:45.678Z'),
      organization_id: 'org',
      data: { user_id: 'u1' },
    });
    expect(JSON.parse(body)).toEqual({
      id: 'evt_2f1c0d7e9a8b4c3d8e7f6a5b4c3d2e1f',
      type: 'end_user.deleted',
      created_at: '2026-11-22T01:23:45.678Z',
      organization_id: 'org',
      data: { user_id: 'u1' },
    });
  });
});
