import { AppError } from '../common/errors/app-error';
import {
  KNOWLEDGE_BODY_BYTES_PER_ACCOUNT,
  KNOWLEDGE_BODY_BYTES_PER_INSTANCE,
  KNOWLEDGE_JSON_MAX_BYTES,
  KnowledgeBodies,
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
    bodies.hold('ann', LARGEST);
    bodies.hold('ann', LARGEST);
    const refused = refusal(() => bodies.hold('ann', 1));
    expect(refused).toBeInstanceOf(AppError);
    expect(refused?.code).toBe('too_many_streams');
    expect(refused?.headers).toEqual({ 'Retry-After': '5' });
    // Another account is not held back by this one.
    bodies.hold('bob', LARGEST);
    expect(bodies.heldBytes('ann')).toBe(KNOWLEDGE_BODY_BYTES_PER_ACCOUNT);
    expect(bodies.heldBytes()).toBe(3 * LARGEST);
  });

  it('holds at most the instance’s bytes of large bodies, every account together; small ones pass', () => {
    const bodies = new KnowledgeBodies();
    const accounts = KNOWLEDGE_BODY_BYTES_PER_INSTANCE / KNOWLEDGE_BODY_BYTES_PER_ACCOUNT;
    for (let index = 0; index < accounts; index++) {
      bodies.hold(`account ${index}`, KNOWLEDGE_BODY_BYTES_PER_ACCOUNT);
    }
    expect(refusal(() => bodies.hold('latecomer', KNOWLEDGE_HEAVY_WRITE_BYTES))?.code).toBe(
      'too_many_streams',
    );
    // A small write is held back by no one else's large ones.
    bodies.hold('latecomer', KNOWLEDGE_HEAVY_WRITE_BYTES - 1);
    expect(bodies.heldBytes('latecomer')).toBe(KNOWLEDGE_HEAVY_WRITE_BYTES - 1);
  });

  it('gives the bytes back once, however often released', () => {
    const bodies = new KnowledgeBodies();
    const release = bodies.hold('ann', LARGEST);
    const other = bodies.hold('ann', LARGEST);
    release();
    release();
    expect(bodies.heldBytes('ann')).toBe(LARGEST);
    other();
    expect(bodies.heldBytes('ann')).toBe(0);
    expect(bodies.heldBytes()).toBe(0);
    bodies.hold('ann', LARGEST);
    bodies.hold('ann', LARGEST);
  });
});
