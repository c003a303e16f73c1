import { AppError } from '../common/errors/app-error';
import {
  KNOWLEDGE_BODY_BYTES_PER_ACCOUNT,
  KNOWLEDGE_BODY_BYTES_PER_INSTANCE,
  KNOWLEDGE_JSON_MAX_BYTES,
  KnowledgeBodies,
  declaredBodyBytes,
} from './knowledge-bodies';
import { KNOWLEDGE_HEAVY_WRITE_BYTES } from './knowledge-write-turns';

const LARGEST = KNOWLEDGE_JSON_MAX_BYTES;

function refusal(hold: () => unknown): AppError | undefined {
  try {
    hold();
  } catch (error) {
    return error as AppError;
  }
  return undefined;
}

describe('KnowledgeBodies', () => {
  it('holds two of the largest bodies per account, and refuses the third with a 429 to retry', () => {
    const bodies = new KnowledgeBodies();
    bodies.holdForAccount('ann', LARGEST);
    bodies.holdForAccount('ann', LARGEST);
    const refused = refusal(() => bodies.holdForAccount('ann', 1));
    expect(refused).toBeInstanceOf(AppError);
    expect(refused?.code).toBe('too_many_streams');
    expect(refused?.headers).toEqual({ 'Retry-After': '5' });
    // Another account is not held back by this one.
    bodies.holdForAccount('bob', LARGEST);
    expect(bodies.heldBytes('ann')).toBe(KNOWLEDGE_BODY_BYTES_PER_ACCOUNT);
    expect(bodies.heldBytes('bob')).toBe(LARGEST);
  });

  it('holds at most the instance’s bytes of large bodies read, every account’s; small ones pass', () => {
    const bodies = new KnowledgeBodies();
    for (let held = 0; held < KNOWLEDGE_BODY_BYTES_PER_INSTANCE; held += LARGEST) {
      bodies.holdOnInstance(LARGEST);
    }
    expect(refusal(() => bodies.holdOnInstance(KNOWLEDGE_HEAVY_WRITE_BYTES))?.code).toBe(
      'too_many_streams',
    );
    // A small write is held back by no one's large ones, and holds nothing of the instance's.
    bodies.holdOnInstance(KNOWLEDGE_HEAVY_WRITE_BYTES - 1)();
    expect(bodies.heldBytes()).toBe(KNOWLEDGE_BODY_BYTES_PER_INSTANCE);
  });

  it('gives the bytes back once, however often released', () => {
    const bodies = new KnowledgeBodies();
    const release = bodies.holdForAccount('ann', LARGEST);
    const other = bodies.holdForAccount('ann', LARGEST);
    const read = bodies.holdOnInstance(LARGEST);
    release();
    release();
    read();
    read();
    expect(bodies.heldBytes('ann')).toBe(LARGEST);
    expect(bodies.heldBytes()).toBe(0);
    other();
    expect(bodies.heldBytes('ann')).toBe(0);
    bodies.holdForAccount('ann', LARGEST);
    bodies.holdForAccount('ann', LARGEST);
  });

  it('weighs a body before it is read by its declared length, a chunked one as the largest, none without one', () => {
    expect(declaredBodyBytes({ 'content-length': '1200' })).toBe(1200);
    expect(declaredBodyBytes({ 'content-length': String(LARGEST + 1) })).toBe(LARGEST);
    expect(declaredBodyBytes({ 'transfer-encoding': 'chunked' })).toBe(LARGEST);
    // A PATCH without a body held 4 MiB of its account's share (review of this change).
    expect(declaredBodyBytes({})).toBe(0);
    expect(declaredBodyBytes({ 'content-length': '0' })).toBe(0);
  });
});
