import { triggeredCalls } from './tool-trigger';

describe('triggeredCalls', () => {
  it('finds T({...}) for the tools given, in message order', () => {
    expect(
      triggeredCalls('please book({"at": "9:00"}) then lookup_order( {"id": "A1"} ) thanks', [
        'lookup_order',
        'book',
      ]),
    ).toEqual([
      { name: 'book', arguments: { at: '9:00' } },
      { name: 'lookup_order', arguments: { id: 'A1' } },
    ]);
  });

  it('takes nested objects and braces inside strings', () => {
    expect(triggeredCalls('t({"a": {"b": "})"}, "c": 1})', ['t'])).toEqual([
      { name: 't', arguments: { a: { b: '})' }, c: 1 } },
    ]);
  });

  it('takes arguments nesting 64 levels, and reads no call in deeper ones', () => {
    const nested = (levels: number) => `{"a":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
    expect(triggeredCalls(`t(${nested(64)})`, ['t'])).toHaveLength(1);
    expect(triggeredCalls(`t(${nested(65)})`, ['t'])).toEqual([]);
    expect(triggeredCalls(`t(${nested(4_000)})`, ['t'])).toEqual([]);
  });

  it('reads a message built against it once: no candidate is parsed whose brackets do not match', () => {
    // Each `{]` leaves the depth at 0; before, each of 1,574 calls tried the 64 `})` at the end,
    // reading each candidate whole (1.5 s of the event loop).
    const message = ' a({]'.repeat(1_574) + '})'.repeat(64);
    const parse = jest.spyOn(JSON, 'parse');
    try {
      expect(triggeredCalls(message, ['a'])).toEqual([]);
      expect(parse).not.toHaveBeenCalled();
    } finally {
      parse.mockRestore();
    }
  });

  it('finds a call after text that is no JSON, and stops at a bracket that does not match', () => {
    expect(triggeredCalls('t({"a": (1)}) t({"a": [1}) t({"b": [1, {"c": null}]})', ['t'])).toEqual([
      { name: 't', arguments: { b: [1, { c: null }] } },
    ]);
  });

  it('ignores unknown tools, other words ending in the name, and what is not an object', () => {
    expect(triggeredCalls('my_t({"a": 1}) u({"a": 1}) t([1]) t("x") t({bad})', ['t'])).toEqual([]);
  });
});
