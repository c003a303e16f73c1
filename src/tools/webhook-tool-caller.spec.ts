import { toolCallEventId } from './webhook-tool-caller';

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
