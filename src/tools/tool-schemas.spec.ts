import { AppError } from '../common/errors/app-error';
import { ToolSchemas } from './tool-schemas';

const numbered = (n: number) => ({
  type: 'object',
  properties: { [`field_${n}`]: { type: 'integer' } },
});

/** A schema ajv takes long to compile: conditions, each written out as code (0.1 s for 300). */
const slowToCompile = (conditions = 300) => ({
  type: 'object',
  allOf: Array.from({ length: conditions }, (_, i) => ({
    if: { properties: { a: { const: i } } },
    then: { required: ['b'] },
  })),
});

/** A schema of `width` string properties, each with a pattern: its compiled code takes heap. */
const wide = (n: number, width: number) => ({
  type: 'object',
  properties: Object.fromEntries(
    Array.from({ length: width }, (_, i) => [
      `f${n}_${i}`,
      { type: 'string', pattern: `^a${i}$`, minLength: 1 },
    ]),
  ),
});

/** Time enough for a slow schema on a machine as loaded as CI's: what these specs test is order. */
const UNHURRIED = { timeoutMs: 60_000 };

/** An organization that is an account of its own (made by a user who made no other). */
const alone = (organizationId: string) => ({
  organizationId,
  account: `maker of ${organizationId}`,
});

describe('ToolSchemas', () => {
  const opened: ToolSchemas[] = [];
  const schemasWith = (options: ConstructorParameters<typeof ToolSchemas>[0] = {}) => {
    const schemas = new ToolSchemas(options);
    opened.push(schemas);
    return schemas;
  };
  afterEach(async () => {
    await Promise.all(opened.map((schemas) => schemas.close()));
    opened.length = 0;
  });

  it('compiles a schema once, however its keys are ordered, and validates with it', async () => {
    const schemas = schemasWith();
    const schema = { type: 'object', required: ['at'], properties: { at: { type: 'string' } } };
    const reordered = { properties: { at: { type: 'string' } }, required: ['at'], type: 'object' };
    expect(await schemas.problemOf(alone('org'), schema)).toBeUndefined();
    expect(await schemas.validate(alone('org'), reordered, { at: 'noon' })).toEqual({
      valid: true,
    });
    expect(await schemas.validate(alone('org'), schema, { at: 12 })).toEqual({
      valid: false,
      instancePath: '/at',
      message: 'must be string',
    });
    expect(schemas.compiles).toBe(1);
  });

  it('keeps at most its capacity, the least recently used out first', async () => {
    const schemas = schemasWith({ capacity: 3 });
    for (const n of [0, 1, 2, 0, 3]) await schemas.problemOf(alone('org'), numbered(n));
    expect(schemas.compiles).toBe(4);
    // The fourth pushed out the least recently used: 1, not 0.
    await schemas.problemOf(alone('org'), numbered(0));
    expect(schemas.compiles).toBe(4);
    await schemas.problemOf(alone('org'), numbered(1));
    expect(schemas.compiles).toBe(5);
  });

  it('keeps at most its text capacity: large schemas push out the oldest', async () => {
    // Each schema's text and the code ajv wrote for it count; two fit, three do not.
    const schemas = schemasWith({ textCapacity: 2_500 });
    for (const n of [0, 1, 2]) await schemas.problemOf(alone('org'), numbered(n));
    await schemas.problemOf(alone('org'), numbered(2));
    expect(schemas.compiles).toBe(3);
    await schemas.problemOf(alone('org'), numbered(0));
    expect(schemas.compiles).toBe(4);
  });

  it('counts the code of the definitions a schema refers to, not only its own', async () => {
    // About 1.2 KB of text, 0.5 KB of code of its own and 18 KB behind its one `$ref`: counted
    // whole, one fits in 30 KB, not two (the root's code alone let 17 in).
    const referring = (n: number) => ({ $defs: { shape: wide(n, 20) }, $ref: '#/$defs/shape' });
    const schemas = schemasWith({ textCapacity: 30_000 });
    for (const n of [0, 1, 0]) await schemas.problemOf(alone('org'), referring(n));
    expect(schemas.compiles).toBe(3);
  });

  it('compiles off the event loop: requests go on while a slow schema compiles', async () => {
    const schemas = schemasWith(UNHURRIED);
    let turns = 0;
    let compiled = false;
    const turning = new Promise<void>((resolve) => {
      const turn = () => {
        turns += 1;
        if (compiled) resolve();
        else setImmediate(turn);
      };
      setImmediate(turn);
    });
    // Before, ajv compiled on the event loop: not one turn until it was done.
    const problem = await schemas.problemOf(alone('org'), slowToCompile());
    compiled = true;
    await turning;
    expect(problem).toBeUndefined();
    expect(turns).toBeGreaterThan(10);
  });

  it('validates through a definition used 700 times (compiled once, called at each use)', async () => {
    const schemas = schemasWith();
    const values = Array.from({ length: 100 }, (_, i) => `value_${i}`);
    const schema = {
      type: 'object',
      $defs: { a: { enum: values } },
      properties: { q: { allOf: Array.from({ length: 700 }, () => ({ $ref: '#/$defs/a' })) } },
    };
    expect(await schemas.problemOf(alone('org'), schema)).toBeUndefined();
    expect(await schemas.validate(alone('org'), schema, { q: 'value_7' })).toEqual({ valid: true });
    expect(await schemas.validate(alone('org'), schema, { q: 'other' })).toMatchObject({
      valid: false,
      instancePath: '/q',
    });
  });

  it('ends a compile past its time, and compiles the next schema in a new worker', async () => {
    const schemas = schemasWith({ timeoutMs: 50 });
    expect(await schemas.problemOf(alone('org'), slowToCompile(1_000))).toBe(
      'must compile within 50 ms',
    );
    expect(await schemas.problemOf(alone('org'), numbered(0))).toBeUndefined();
    expect(await schemas.validate(alone('org'), numbered(0), { field_0: 'x' })).toMatchObject({
      valid: false,
    });
  });

  it('takes an answer that came in time while this thread was held past the time', async () => {
    const schemas = schemasWith({ timeoutMs: 200 });
    await schemas.problemOf(alone('org'), numbered(0));
    const answer = schemas.validate(alone('org'), numbered(0), { field_0: 1 });
    // This thread held for longer than the time, from the loop's check phase: the timer is
    // due before the loop next reads the worker's answer, which came meanwhile.
    await new Promise<void>((resolve) =>
      setImmediate(() => {
        const until = Date.now() + 1_000;
        while (Date.now() < until);
        resolve();
      }),
    );
    // Before, the timer ran first: a job answered in a millisecond was ended as too slow.
    expect(await answer).toEqual({ valid: true });
    expect(schemas.compiles).toBe(1);
  });

  it('takes the account its jobs took the least time of: quick schemas pass slow ones', async () => {
    const schemas = schemasWith(UNHURRIED);
    await schemas.problemOf(alone('warm'), numbered(0));
    const answered: string[] = [];
    const check = (account: string, schema: object, name: string) =>
      schemas.problemOf(alone(account), schema).then((problem) => {
        expect(problem).toBeUndefined();
        answered.push(name);
      });
    const checks = [1, 2, 3, 4, 5].map((n) =>
      check('busy', { ...slowToCompile(), title: `busy ${n}` }, `busy ${n}`),
    );
    checks.push(...[1, 2, 3, 4].map((n) => check('quiet', numbered(n), `quiet ${n}`)));
    await Promise.all(checks);
    // The first slow one was running when they came; then every quick one went before the
    // second (taken in turn, each second one would have waited for three slow compiles).
    expect(answered.slice(0, 5)).toEqual(['busy 1', 'quiet 1', 'quiet 2', 'quiet 3', 'quiet 4']);
  });

  it('charges an account that sends one job at a time: quick schemas pass its slow ones too', async () => {
    const schemas = schemasWith(UNHURRIED);
    await schemas.problemOf(alone('warm'), numbered(0));
    const answered: string[] = [];
    let sending = true;
    // One slow schema at a time, each sent once the last was answered.
    const slowLoop = (async () => {
      for (let n = 1; sending; n += 1) {
        await schemas.problemOf(alone('one-at-a-time'), { ...slowToCompile(), title: `slow ${n}` });
        answered.push(`slow ${n}`);
      }
    })();
    while (!answered.includes('slow 1')) await new Promise((resolve) => setTimeout(resolve, 5));
    await Promise.all(
      [1, 2, 3, 4, 5, 6].map((n) =>
        schemas.problemOf(alone('quick'), numbered(n)).then(() => void answered.push(`quick ${n}`)),
      ),
    );
    sending = false;
    await slowLoop;
    // Before, it came back level with the least served after each answer, and took every other
    // turn: the sixth quick one waited for five more slow compiles.
    const slowBefore = answered
      .slice(0, answered.indexOf('quick 6'))
      .filter((name) => name.startsWith('slow'));
    // The first, and the second sent while the quick ones came.
    expect(slowBefore).toEqual(['slow 1', 'slow 2']);
  });

  /**
   * A warmed worker's checks, each of an organization and its account, recording its name in
   * `answered` once answered.
   */
  async function checksInOrder() {
    const schemas = schemasWith(UNHURRIED);
    await schemas.problemOf(alone('warm'), numbered(0));
    const answered: string[] = [];
    const check = (organizationId: string, account: string, schema: object, name: string) =>
      schemas.problemOf({ organizationId, account }, schema).then(() => void answered.push(name));
    return { answered, check };
  }
  const slow = (name: string) => ({ ...slowToCompile(), title: name });

  it("shares the worker's time by account, its organizations taking turns", async () => {
    const { answered, check } = await checksInOrder();
    // One user's two organizations send slow schemas, then another user's one quick ones.
    const checks = [1, 2, 3].map((n) => check('a1', 'user-a', slow(`a1 ${n}`), `a1 ${n}`));
    checks.push(...[1, 2, 3].map((n) => check('a2', 'user-a', slow(`a2 ${n}`), `a2 ${n}`)));
    checks.push(...[1, 2, 3, 4].map((n) => check('b', 'user-b', numbered(n), `b ${n}`)));
    await Promise.all(checks);
    // a1's first was running when the others came. Then user-b's quick ones before any more of
    // user-a's (as two accounts, a2 came level with b and went first), and a1 and a2 in turn
    // (taken in the order they came, a1's three went before a2's).
    expect(answered).toEqual([
      'a1 1',
      'b 1',
      'b 2',
      'b 3',
      'b 4',
      'a1 2',
      'a2 1',
      'a1 3',
      'a2 2',
      'a2 3',
    ]);
  });

  it("charges a line's jobs to the account it began with, should the organization's account change", async () => {
    const { answered, check } = await checksInOrder();
    const checks = [check('x', 'user-x', slow('x 1'), 'x 1')];
    // The organization's second job comes under another account (its maker deleted, say).
    checks.push(check('o', 'user-a', slow('o 1'), 'o 1'), check('o', 'user-b', slow('o 2'), 'o 2'));
    checks.push(...[1, 2, 3].map((n) => check('y', 'user-y', numbered(n), `y ${n}`)));
    await Promise.all(checks);
    // o 2 is charged as o 1 was: the quick ones go first. As a newcomer never served, it went
    // before y's second.
    expect(answered).toEqual(['x 1', 'o 1', 'y 1', 'y 2', 'y 3', 'o 2']);
  });

  it("refuses (429) an organization's schemas past the number it may have waiting", async () => {
    const schemas = schemasWith({ ...UNHURRIED, waitingPerOrganization: 2 });
    // Once the worker has started, the first runs at once; two wait.
    await schemas.problemOf(alone('org'), numbered(1));
    const taken = [1, 2, 3].map((n) =>
      schemas.problemOf(alone('org'), { ...slowToCompile(), title: `${n}` }),
    );
    await expect(schemas.problemOf(alone('org'), numbered(0))).rejects.toMatchObject({
      code: 'rate_limited',
    } satisfies Partial<AppError>);
    expect(await schemas.problemOf(alone('other'), numbered(0))).toBeUndefined();
    await Promise.all(taken);
  });

  it("keeps its worker through an $async schema's rejected validation: the next account's job is answered", async () => {
    const schemas = schemasWith();
    const plain = numbered(0);
    expect(await schemas.validate(alone('other'), plain, { field_0: 1 })).toEqual({ valid: true });
    const asynchronous = { type: 'object', $async: true, properties: { a: { type: 'string' } } };
    const answers = await Promise.all([
      schemas.validate(alone('hostile'), asynchronous, { a: 1 }),
      schemas.validate(alone('other'), plain, { field_0: 2 }),
      schemas.validate(alone('hostile'), asynchronous, { a: 2 }),
      schemas.validate(alone('other'), plain, { field_0: 3 }),
    ]);
    // Before, the rejection no job awaited ended the worker, failing the job sent after it.
    expect(answers).toEqual([
      { valid: false, schemaProblem: 'does not validate synchronously' },
      { valid: true },
      { valid: false, schemaProblem: 'does not validate synchronously' },
      { valid: true },
    ]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await schemas.validate(alone('other'), plain, { field_0: 4 })).toEqual({ valid: true });
    // One worker all along: the plain schema was compiled once (a new worker compiles it again).
    expect(schemas.compiles).toBe(1);
  });

  it("answers a validation past the organization's waiting jobs as unchecked, not as invalid", async () => {
    const schemas = schemasWith({
      ...UNHURRIED,
      waitingPerOrganization: 2,
      argumentsWaitingPerOrganization: 2,
    });
    await schemas.problemOf(alone('org'), numbered(1));
    const running = schemas.problemOf(alone('org'), slowToCompile());
    const waiting = schemas.problemOf(alone('org'), { ...slowToCompile(), title: 'waiting' });
    // Checks of arguments are counted apart from schemas, to a bound of their own (a round's
    // calls are sent at once): two wait, the third is not checked.
    const calls = [1, 2].map(() => schemas.validate(alone('org'), numbered(1), { field_1: 1 }));
    expect(await schemas.validate(alone('org'), numbered(1), { field_1: 1 })).toEqual({
      valid: false,
      unchecked: "wait behind too many of the organization's schemas to be checked",
    });
    // A schema still has its place: one waits, the bound is two (counted together, four were).
    const another = schemas.problemOf(alone('org'), numbered(2));
    await Promise.all([running, waiting]);
    expect(await another).toBeUndefined();
    expect(await Promise.all(calls)).toEqual([{ valid: true }, { valid: true }]);
  });

  it("runs a job again on a new worker when one holding others' schemas runs out of heap: none fails for another's", async () => {
    // A 16 MiB heap that one account's schemas, all kept, fill within about 100.
    const schemas = schemasWith({
      heapMb: 16,
      capacity: 100_000,
      textCapacity: Number.MAX_SAFE_INTEGER,
      ...UNHURRIED,
    });
    const problems: (string | undefined)[] = [];
    for (let n = 0; n < 600 && schemas.workersStarted < 3; n += 1) {
      problems.push(await schemas.problemOf(alone('filling'), wide(n, 60)));
      problems.push(await schemas.problemOf(alone('other'), numbered(n)));
    }
    // Two workers died with their heaps full; before, the job running then failed each time.
    expect(schemas.workersStarted).toBe(3);
    expect(problems.filter((problem) => problem !== undefined)).toEqual([]);
  }, 120_000);

  it('answers a schema too large for the heap on its own as a problem, after one run on a new worker', async () => {
    const schemas = schemasWith({ heapMb: 16, ...UNHURRIED });
    expect(await schemas.problemOf(alone('org'), numbered(1))).toBeUndefined();
    const answered: string[] = [];
    const tooLarge = schemas
      .problemOf(alone('org'), wide(0, 5_000))
      .finally(() => answered.push('org'));
    // Less served accounts wait meanwhile: the job run again goes first all the same, on a
    // heap that only it has filled (review: it went after them, and failed for their schemas).
    const others = ['a', 'b', 'c'].map((other, i) =>
      schemas.problemOf(alone(other), numbered(i + 2)).finally(() => answered.push(other)),
    );
    expect(await tooLarge).toBe('cannot be compiled within the memory a schema may take');
    expect(await Promise.all(others)).toEqual([undefined, undefined, undefined]);
    expect(answered).toEqual(['org', 'a', 'b', 'c']);
    // Its first worker had answered another job: run again once, on a second, where it failed too.
    expect(schemas.workersStarted).toBe(3);
    // On a worker that had answered nothing (the next, started for it), it is not run again.
    const fresh = schemasWith({ heapMb: 16, ...UNHURRIED });
    expect(await fresh.problemOf(alone('org'), wide(1, 5_000))).toBeDefined();
    expect(fresh.workersStarted).toBe(1);
    expect(await schemas.problemOf(alone('org'), numbered(2))).toBeUndefined();
  }, 60_000);

  it("writes nothing of a schema to the process's output (ajv's logger is off)", async () => {
    const schemas = schemasWith();
    const written: string[] = [];
    const write = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });
    try {
      const forged = 'x"\n{"level":50,"msg":"forged"}\n';
      const schema = { type: 'object', properties: { a: { type: 'string', format: forged } } };
      expect(await schemas.problemOf(alone('org'), schema)).toBeUndefined();
      expect(await schemas.validate(alone('org'), schema, { a: 'y' })).toEqual({ valid: true });
      // The worker's output reaches this thread's stream asynchronously.
      await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      write.mockRestore();
    }
    expect(written.join('')).not.toContain('forged');
  });
});
