import { AppError } from '../common/errors/app-error';
import type { OrganizationsService } from '../organizations/organizations.service';
import {
  KNOWLEDGE_HEAVY_WRITE_BYTES,
  KNOWLEDGE_HEAVY_WRITE_WAIT_MS,
  KnowledgeWriteTurns,
} from './knowledge-write-turns';

/** A write that runs until the test ends it, and says whether it has started. */
function controlledWrite() {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => (end = resolve));
  const write = {
    started: false,
    end,
    run: async () => {
      write.started = true;
      await ended;
      return 'written';
    },
  };
  return write;
}

const settle = () => new Promise((resolve) => setImmediate(resolve));
const HEAVY = KNOWLEDGE_HEAVY_WRITE_BYTES;

/** Organizations' accounts: org-a1 and org-a2 are one user's; any other is its own. */
const ACCOUNTS: Record<string, string> = { 'org-a1': 'user-a', 'org-a2': 'user-a' };
const organizations = {
  accountOf: (organizationId: string) =>
    Promise.resolve(ACCOUNTS[organizationId] ?? organizationId),
} as unknown as OrganizationsService;
const newTurns = () => new KnowledgeWriteTurns(organizations);

describe('KnowledgeWriteTurns', () => {
  afterEach(() => jest.useRealTimers());

  it('runs one heavy write at a time on the instance, whatever the organization; light ones never wait', async () => {
    const turns = newTurns();
    const first = controlledWrite();
    const second = controlledWrite();
    const light = controlledWrite();
    const running = turns.inTurn('org-a', first.run, HEAVY);
    // Weighed once its turn has come (a deletion reads what the document holds then).
    const waiting = turns.inTurn('org-b', second.run, async () => HEAVY);
    const small = turns.inTurn('org-c', light.run, HEAVY - 1);
    await settle();
    expect([first.started, second.started, light.started]).toEqual([true, false, true]);

    light.end();
    await expect(small).resolves.toBe('written');
    first.end();
    await expect(running).resolves.toBe('written');
    await settle();
    expect(second.started).toBe(true);
    second.end();
    await expect(waiting).resolves.toBe('written');
  });

  it("lets an account's organizations wait for the heavy slot with one write, all together", async () => {
    const turns = newTurns();
    const first = controlledWrite();
    const sameAccount = controlledWrite();
    const other = controlledWrite();
    const running = turns.inTurn('org-a1', first.run, HEAVY);
    await settle();
    // org-a2 asks before org-b, but its account already has the write that holds the slot.
    const second = turns.inTurn('org-a2', sameAccount.run, HEAVY);
    await settle();
    const third = turns.inTurn('org-b', other.run, HEAVY);
    await settle();

    first.end();
    await expect(running).resolves.toBe('written');
    await settle();
    expect([sameAccount.started, other.started]).toEqual([false, true]);
    other.end();
    await expect(third).resolves.toBe('written');
    await settle();
    expect(sameAccount.started).toBe(true);
    sameAccount.end();
    await expect(second).resolves.toBe('written');
  });

  it("refuses an account's heavy write that waited past the limit behind its account's other one, before it reached the slot", async () => {
    jest.useFakeTimers();
    const turns = newTurns();
    const hog = controlledWrite();
    const late = controlledWrite();
    const hogging = turns.inTurn('org-a1', hog.run, HEAVY);
    await jest.advanceTimersByTimeAsync(0);
    const refused = turns.inTurn('org-a2', late.run, HEAVY).catch((error: unknown) => error);
    await jest.advanceTimersByTimeAsync(KNOWLEDGE_HEAVY_WRITE_WAIT_MS);
    const error = (await refused) as AppError;
    expect(error).toBeInstanceOf(AppError);
    expect(error.code).toBe('too_many_streams');
    expect(late.started).toBe(false);
    expect(turns.inFlight('org-a2')).toBe(0);
    hog.end();
    await expect(hogging).resolves.toBe('written');
  });

  it('counts the wait behind the account and the wait for the slot against one limit', async () => {
    jest.useFakeTimers();
    const turns = newTurns();
    const first = controlledWrite();
    const other = controlledWrite();
    const second = controlledWrite();
    const holding = turns.inTurn('org-a1', first.run, HEAVY);
    await jest.advanceTimersByTimeAsync(0);
    // Another account's write waits for the slot; org-a2's waits behind its account's first.
    const otherWrite = turns.inTurn('org-b', other.run, HEAVY);
    const refused = turns.inTurn('org-a2', second.run, HEAVY).catch((error: unknown) => error);
    await jest.advanceTimersByTimeAsync(KNOWLEDGE_HEAVY_WRITE_WAIT_MS * (2 / 3));
    // The slot goes to the other account's write, and org-a2's then waits for it: what is left
    // of its 30 s, not 30 s more.
    first.end();
    await expect(holding).resolves.toBe('written');
    await jest.advanceTimersByTimeAsync(KNOWLEDGE_HEAVY_WRITE_WAIT_MS / 3);
    expect(((await refused) as AppError).code).toBe('too_many_streams');
    expect(second.started).toBe(false);
    other.end();
    await expect(otherWrite).resolves.toBe('written');
  });

  it('refuses a heavy write that waited past its limit with 429, and gives no slot away', async () => {
    jest.useFakeTimers();
    const turns = newTurns();
    const hog = controlledWrite();
    const late = controlledWrite();
    const hogging = turns.inTurn('org-hog', hog.run, HEAVY);
    const refused = turns.inTurn('org-late', late.run, HEAVY).catch((error: unknown) => error);
    await jest.advanceTimersByTimeAsync(KNOWLEDGE_HEAVY_WRITE_WAIT_MS);
    const error = (await refused) as AppError;
    expect(error).toBeInstanceOf(AppError);
    expect(error.code).toBe('too_many_streams');
    expect(error.headers).toHaveProperty('Retry-After');
    expect(late.started).toBe(false);
    expect(turns.inFlight('org-late')).toBe(0);

    // The slot goes to the next heavy write once the one holding it ends.
    hog.end();
    await hogging;
    const next = controlledWrite();
    const nextWrite = turns.inTurn('org-late', next.run, HEAVY);
    await jest.advanceTimersByTimeAsync(0);
    expect(next.started).toBe(true);
    next.end();
    await expect(nextWrite).resolves.toBe('written');
  });

  it("drops a write whose client goes while it waits for its organization's turn; those behind keep their order", async () => {
    const turns = newTurns();
    const first = controlledWrite();
    const gone = controlledWrite();
    const third = controlledWrite();
    const client = new AbortController();
    const running = turns.inTurn('org-a', first.run, 10);
    const dropped = turns
      .inTurn('org-a', gone.run, 10, client.signal)
      .catch((error: unknown) => error);
    const behind = turns.inTurn('org-a', third.run, 10);
    await settle();
    expect(turns.inFlight('org-a')).toBe(3);

    client.abort(new Error('the client closed the connection'));
    expect(((await dropped) as Error).message).toBe('the client closed the connection');
    expect(turns.inFlight('org-a')).toBe(2);
    // The write behind the one that left still waits for the one running.
    await settle();
    expect([gone.started, third.started]).toEqual([false, false]);

    first.end();
    await expect(running).resolves.toBe('written');
    await settle();
    expect([gone.started, third.started]).toEqual([false, true]);
    third.end();
    await expect(behind).resolves.toBe('written');
    expect(turns.inFlight('org-a')).toBe(0);
  });

  it("gives up the heavy slot's line when the client goes, and the slot goes to the next", async () => {
    const turns = newTurns();
    const hog = controlledWrite();
    const gone = controlledWrite();
    const next = controlledWrite();
    const client = new AbortController();
    const hogging = turns.inTurn('org-hog', hog.run, HEAVY);
    const dropped = turns
      .inTurn('org-gone', gone.run, HEAVY, client.signal)
      .catch((error: unknown) => error);
    const nextWrite = turns.inTurn('org-next', next.run, HEAVY);
    await settle();
    client.abort(new Error('the client closed the connection'));
    expect(((await dropped) as Error).message).toBe('the client closed the connection');
    expect(turns.inFlight('org-gone')).toBe(0);

    hog.end();
    await hogging;
    await settle();
    expect([gone.started, next.started]).toEqual([false, true]);
    next.end();
    await expect(nextWrite).resolves.toBe('written');
  });

  it('never starts a write whose client had gone before it came', async () => {
    const turns = newTurns();
    const write = controlledWrite();
    const error = await turns
      .inTurn('org-a', write.run, 10, AbortSignal.abort(new Error('gone')))
      .catch((thrown: unknown) => thrown);
    expect((error as Error).message).toBe('gone');
    expect(write.started).toBe(false);
    expect(turns.inFlight('org-a')).toBe(0);
  });
});
