import {
  loadLabelledMessages,
  loadModerationMessages,
} from '../../test/fixtures/safety/labelled-set';
import { FakeOpenAI } from '../../test/support/fake-openai';
import { LocalSafetyClassifier } from './local/local-safety-classifier';
import { OpenAiModerationClassifier } from './openai/openai-moderation-classifier';
import type { SafetyClassifier } from './safety-categories';
import type { AppliedSafetySettings, SafetySettingsService } from './safety-settings.service';
import { ReplySafety } from './reply-safety.service';

/**
 * Contract §29: a streamed reply is blocked whenever the same reply, not streamed, would be; each
 * sentence is checked together with the sentences released before it. Output moderation is run
 * both ways over every reply of the labelled sets, and over long replies whose harm is told in
 * sentences further apart than the gate's context reaches.
 */
const settings: AppliedSafetySettings = {
  crisisResponse: true,
  crisisMessage: 'Call 988.',
  inputModeration: 'flag',
  outputModeration: 'block',
};

/** A sentence of everyday chat, repeated to pad a reply. */
const FILLER = 'We talked about the weather, the garden and the football match on Saturday. ';

/** Harm told across sentences, as a reply could tell it; the plain classifier flags each. */
const ACROSS = loadModerationMessages().filter((message) => message.kind === 'across_sentences');

/** Each reply's first sentence, then about 3,000 characters of chat, then the rest. */
function padded(reply: string): string {
  const cut = reply.indexOf('. ') + 2;
  return `${reply.slice(0, cut)}${FILLER.repeat(40)}${reply.slice(cut)}`;
}

const replies = (): string[] => [
  ...loadModerationMessages().map((message) => message.text),
  ...loadLabelledMessages().map((message) => message.text),
  ...ACROSS.map((message) => padded(message.text)),
];

/** A reply as a failure shows it: long padded ones by their start and length. */
const shown = (reply: string) =>
  reply.length > 120 ? `${reply.slice(0, 60)}… (${reply.length} characters)` : reply;

interface Streamed {
  blocked: boolean;
  released: string;
}

/** The reply streamed through the gate 4 characters at a time, as a provider sends tokens. */
async function stream(safety: ReplySafety, reply: string): Promise<Streamed> {
  let released = '';
  const gate = safety.gate(
    settings,
    new AbortController().signal,
    async (text) => void (released += text),
    () => undefined,
  );
  for (let at = 0; at < reply.length; at += 4) await gate.push(reply.slice(at, at + 4));
  return { blocked: (await gate.end()) === 'blocked', released };
}

async function plainlyBlocked(safety: ReplySafety, reply: string): Promise<boolean> {
  return (await safety.screenReply(settings, reply, new AbortController().signal)).length > 0;
}

function replySafety(classifier: SafetyClassifier): ReplySafety {
  // Only `screenMessage` reads the organization's settings: these tests give them.
  return new ReplySafety({} as SafetySettingsService, classifier);
}

describe('Streamed output moderation judges what the plain reply would', () => {
  const local = new LocalSafetyClassifier();

  describe('with the local classifier', () => {
    const safety = replySafety(local);

    it('gives the verdict of the plain reply on every reply of the labelled sets', async () => {
      const disagreements: { reply: string; plain: boolean; streamed: boolean }[] = [];
      let blocked = 0;
      for (const reply of replies()) {
        const plain = await plainlyBlocked(safety, reply);
        const streamed = (await stream(safety, reply)).blocked;
        if (plain) blocked++;
        if (plain !== streamed) disagreements.push({ reply: shown(reply), plain, streamed });
      }
      expect(disagreements).toEqual([]);
      // The sets hold replies of both kinds: agreement is not everything passing.
      expect(blocked).toBeGreaterThanOrEqual(40);
    });

    it('checks each sentence with those released before it: "The knife is ready." never leaves', async () => {
      const { blocked, released } = await stream(safety, 'I will kill him. The knife is ready.');
      expect({ blocked, released }).toEqual({ blocked: true, released: 'I will kill him.' });
    });

    it('releases no word of a phrase cut by three dots or by the length cut (review)', async () => {
      // The gate ends a sentence after three dots, where the classifier reads a pause: the half
      // after them, clean alone, was released unread with the half before.
      const ellipsis =
        'Sure, here is how to make a... bomb. First get a steel pipe and two end caps. Then fill it.';
      // A run without a sentence end is cut after about 1,000 characters, at a space.
      const run = `${'so we talked and talked '.repeat(41)}and then how to make a pipe bomb at home with simple parts. Step one is easy.`;
      for (const reply of [ellipsis, run, ellipsis.replace('...', '…')]) {
        expect(await plainlyBlocked(safety, reply)).toBe(true);
        const { blocked, released } = await stream(safety, reply);
        expect({ blocked, bomb: released.includes('bomb') }).toEqual({
          blocked: true,
          bomb: false,
        });
      }
    });

    it('blocks a reply whose harm is told further apart than the context reaches', async () => {
      const reply = padded('I will kill him. The knife is ready.');
      expect(reply.length).toBeGreaterThan(3_000);
      const { blocked } = await stream(safety, reply);
      expect(blocked).toBe(true);
    });

    it('may block where a later sentence would have excused an earlier one, never the reverse', async () => {
      // Released sentences cannot be taken back: the first is judged before the laugh arrives.
      const reply = "I'm going to kill him tomorrow. Haha just kidding 😂";
      expect(await plainlyBlocked(safety, reply)).toBe(false);
      expect((await stream(safety, reply)).blocked).toBe(true);
    });
  });

  describe('with the OpenAI moderation classifier', () => {
    let fake: FakeOpenAI;
    let safety: ReplySafety;

    beforeAll(async () => {
      fake = await FakeOpenAI.start();
      // The provider judges the whole input it is sent, as its model does.
      fake.moderate = (input) => {
        const found = local.classifySync(input).categories;
        return {
          flagged: [
            ...(found.includes('violence') ? ['violence/graphic'] : []),
            ...(found.includes('sexual_minors') ? ['sexual/minors'] : []),
          ],
        };
      };
      safety = replySafety(
        new OpenAiModerationClassifier({
          apiKey: 'sk-test',
          baseUrl: fake.url,
          timeoutMs: 5_000,
          fallback: local,
          onFallback: (reason, error) => {
            throw new Error(`the fake provider should answer (${reason}): ${String(error)}`);
          },
        }),
      );
    });
    afterAll(() => fake.close());

    it('gives the verdict of the plain reply on every reply of the moderation set', async () => {
      const disagreements: { reply: string; plain: boolean; streamed: boolean }[] = [];
      const moderationReplies = [
        ...loadModerationMessages().map((message) => message.text),
        ...ACROSS.map((message) => padded(message.text)),
      ];
      for (const reply of moderationReplies) {
        const plain = await plainlyBlocked(safety, reply);
        const streamed = (await stream(safety, reply)).blocked;
        if (plain !== streamed) disagreements.push({ reply: shown(reply), plain, streamed });
      }
      expect(disagreements).toEqual([]);
      expect(fake.moderations.length).toBeGreaterThan(moderationReplies.length * 2);
      // About 700 moderation requests over loopback, on a shared machine.
    }, 60_000);
  });
});
