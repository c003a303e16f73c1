import { toolCallEventId } from './webhook-tool-caller';

describe('toolCallEventId', () => {
  const base = ['turn_01', 2, 0, 'book', { at: '9:00' }] as const;
  const id = toolCallEventId(...base);

  it('is an event id, the same for the same call asked again', () => {
    expect(id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(toolCallEventId('turn_01', 2, 0, 'book', { at: '9:00' })).toBe(id);
  });

  it('differs for another turn, round, place in the round, tool or arguments', () => {
    const others = [
      toolCallEventId('turn_02', 2, 0, 'book', { at: '9:00' }),
      toolCallEventId('turn_01', 3, 0, 'book', { at: '9:00' }),
      toolCallEventId('turn_01', 2, 1, 'book', { at: '9:00' }),
      toolCallEventId('turn_01', 2, 0, 'cancel', { at: '9:00' }),
      toolCallEventId('turn_01', 2, 0, 'book', { at: '10:00' }),
    ];
    expect(new Set([id, ...others]).size).toBe(others.length + 1);
  });
});
