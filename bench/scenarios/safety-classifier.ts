import { loadavg } from 'node:os';
import { LocalSafetyClassifier } from '../../src/safety/local/local-safety-classifier';
import { ReplySafety } from '../../src/safety/reply-safety.service';
import type { SafetyClassifier } from '../../src/safety/safety-categories';
import type {
  AppliedSafetySettings,
  SafetySettingsService,
} from '../../src/safety/safety-settings.service';
import { SentenceGate } from '../../src/safety/sentence-gate';
import {
  crisisFigures,
  type CrisisFigures,
  type LabelledMessage,
  LANGUAGES,
  loadLabelledMessages,
  loadModerationMessages,
  SPLITS,
} from '../../test/fixtures/safety/labelled-set';
import { REPLIES } from './support/companion-replies';
import { percentile } from './support/stats';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 200);
const LONG_ROUNDS = Number(process.env.BENCH_LONG_ROUNDS ?? 100);

const ms = (nanoseconds: number) => Number((nanoseconds / 1e6).toFixed(4));

/** p50 / p99 / max, in ms, of one timing per classification. */
function costs(timings: number[]): {
  runs: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
} {
  const sorted = [...timings].sort((a, b) => a - b);
  return {
    runs: sorted.length,
    p50_ms: ms(percentile(sorted, 50)),
    p99_ms: ms(percentile(sorted, 99)),
    max_ms: ms(sorted[sorted.length - 1]),
  };
}

/** CPU time of one classification, in ns: unlike wall-clock, not lengthened by waiting for a core. */
function cpuTime(classifier: LocalSafetyClassifier, text: string): number {
  const start = process.cpuUsage();
  classifier.classifySync(text);
  const { user, system } = process.cpuUsage(start);
  return (user + system) * 1000;
}

function time(classifier: LocalSafetyClassifier, text: string): number {
  const start = process.hrtime.bigint();
  classifier.classifySync(text);
  return Number(process.hrtime.bigint() - start);
}

function quality(messages: LabelledMessage[], classifier: LocalSafetyClassifier) {
  const figures = crisisFigures(messages, (text) =>
    classifier.classifySync(text).categories.includes('self_harm'),
  );
  const summary = (language: (typeof LANGUAGES)[number]) => {
    const f: CrisisFigures = figures[language];
    return {
      crisis: f.crisis,
      negatives: f.negatives,
      recall: Number(f.recall.toFixed(3)),
      false_positive_rate: Number(f.falsePositiveRate.toFixed(3)),
      missed: f.missed,
      false_positives: f.falsePositives,
    };
  };
  return Object.fromEntries(LANGUAGES.map((language) => [language, summary(language)]));
}

/** Text of `length` characters built by repeating `unit`. */
const repeatTo = (unit: string, length: number) =>
  unit.repeat(Math.ceil(length / unit.length)).slice(0, length);

/** The local classifier, counting the characters it reads. */
class CountingClassifier implements SafetyClassifier {
  readonly name = 'local';
  classified = 0;
  scanned = 0;
  constructor(private readonly inner: LocalSafetyClassifier) {}
  classify(text: string) {
    this.classified += text.length;
    return Promise.resolve(this.inner.classifySync(text));
  }
  couldFlagAfter(text: string) {
    this.scanned += text.length;
    return this.inner.couldFlagAfter(text);
  }
}

const STREAM_SETTINGS: AppliedSafetySettings = {
  crisisResponse: true,
  crisisMessage: 'Call 988.',
  inputModeration: 'flag',
  outputModeration: 'block',
};

/** CPU time, in ns, of a reply streamed in 4-character deltas through `gate`. */
async function streamCpu(gate: SentenceGate, reply: string): Promise<number> {
  const start = process.cpuUsage();
  for (let at = 0; at < reply.length; at += 4) await gate.push(reply.slice(at, at + 4));
  await gate.end();
  const { user, system } = process.cpuUsage(start);
  return (user + system) * 1000;
}

/**
 * Output moderation of a streamed reply (ReplySafety's gate: each sentence read with up to 2,000
 * characters of the released ones before it when it holds a phrase of the lexicon, and a reply
 * of more than one sentence read whole at its end) against one classification of the whole,
 * for replies of growing length. Two kinds of reply: a companion's everyday replies, where few
 * sentences hold a phrase, and the worst case, where every sentence holds one and is read with
 * its context.
 */
async function streamedModeration(classifier: LocalSafetyClassifier) {
  const kinds: Record<string, string> = {
    // 3 of its 36 sentences hold a phrase ("tonight", "kids", "finishing").
    companion_replies: `${REPLIES.join(' ')} `,
    a_phrase_in_every_sentence:
      'I could die laughing at that video, it is the funniest thing I saw this week. ',
  };
  const lengths = [300, 1_000, 2_000, 5_000, 20_000];
  const rows: Record<string, Record<string, unknown>> = {};
  for (const [kind, sentence] of Object.entries(kinds)) {
    rows[kind] = {};
    for (const length of lengths) {
      const reply = repeatTo(sentence, length);
      const counting = new CountingClassifier(classifier);
      const safety = new ReplySafety({} as SafetySettingsService, counting);
      const moderated = () =>
        safety.gate(
          STREAM_SETTINGS,
          new AbortController().signal,
          async () => undefined,
          () => undefined,
        );
      const unchecked = () =>
        new SentenceGate({ check: async () => 'allow', release: () => undefined });
      const rounds = length >= 5_000 ? 7 : 21;
      for (let round = 0; round < 3; round++) await streamCpu(moderated(), reply);
      counting.classified = 0;
      counting.scanned = 0;
      const withModeration: number[] = [];
      const gateAlone: number[] = [];
      for (let round = 0; round < rounds; round++) {
        withModeration.push(await streamCpu(moderated(), reply));
        gateAlone.push(await streamCpu(unchecked(), reply));
      }
      const plain = Array.from({ length: rounds }, () => cpuTime(classifier, reply));
      const median = (values: number[]) =>
        percentile(
          [...values].sort((a, b) => a - b),
          50,
        );
      rows[kind][length] = {
        characters_classified_per_reply_character: Number(
          (counting.classified / rounds / length).toFixed(2),
        ),
        characters_scanned_for_phrases_per_reply_character: Number(
          (counting.scanned / rounds / length).toFixed(2),
        ),
        streamed_moderation_cpu_ms_p50: ms(median(withModeration) - median(gateAlone)),
        plain_classification_cpu_ms_p50: ms(median(plain)),
      };
    }
  }
  return {
    method:
      'a reply of N characters (companion replies repeated, or one sentence with a phrase repeated) streamed in 4-character deltas through ReplySafety.gate with the local classifier; moderation CPU = CPU of the stream through it minus through a gate that checks nothing (medians of 21 runs, 7 from 5,000 characters); plain = CPU of one classification of the whole reply',
    by_kind_and_reply_length: rows,
  };
}

/**
 * The local safety classifier: its figures on the labelled set (recall on crisis expressions and
 * false-positive rate on hard negatives, per language, on the whole set and on each split, the
 * obfuscated one included), its cost per message, warm, over many runs of the whole set, of the
 * obfuscated split and on 10,000-character messages, and the cost of output moderation of a
 * streamed reply against the plain one.
 * Goal: p99 ≤ 0.2 ms per message of chat length; cost linear in the length of long messages.
 * Timings are wall-clock on a shared machine, so the load average at the start is recorded; long
 * messages are also measured in CPU time, which waiting for a busy core does not lengthen.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadavg().map((value) => Number(value.toFixed(2)));
  const constructStart = process.hrtime.bigint();
  const classifier = new LocalSafetyClassifier();
  const constructNs = Number(process.hrtime.bigint() - constructStart);

  const messages = loadLabelledMessages();
  const moderation = loadModerationMessages();
  const moderationCorrect = moderation.filter(
    (message) =>
      JSON.stringify(classifier.classifySync(message.text).categories) ===
      JSON.stringify(message.categories),
  ).length;

  // Warm up: the JIT settles on the hot paths before anything is timed.
  for (let round = 0; round < 20; round++) for (const { text } of messages) time(classifier, text);
  const perMessage: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const { text } of messages) perMessage.push(time(classifier, text));
  }
  const lengths = messages.map((message) => message.text.length).sort((a, b) => a - b);

  const labelledText = messages.map((message) => message.text).join(' ');
  const longKinds: Record<string, string> = {
    labelled_messages_joined: repeatTo(`${labelledText} `, 10_000),
    english_prose: repeatTo(
      'we walked to the market, bought bread and talked about the match. ',
      10_000,
    ),
    spaced_letters: repeatTo('k i l l ', 10_000),
    japanese: repeatTo('今日はいい天気ですね。散歩に行きたい。', 10_000),
    one_long_word: 'a'.repeat(10_000),
    emoji: repeatTo('😂🔪💀👍🏽 ', 10_000),
    // Many phrases that other phrases cancel or deny: the rules' windows keep this linear.
    cancelled_phrases: repeatTo(
      "i could die laughing, i don't want to die, kill myself laughing ",
      10_000,
    ),
    sexual_minors_markers: repeatTo(
      'my kid and the teen write a story about sex ed and puberty. ',
      10_000,
    ),
  };
  const long: Record<
    string,
    { wall_clock: ReturnType<typeof costs>; cpu: ReturnType<typeof costs> }
  > = {};
  for (const [kind, text] of Object.entries(longKinds)) {
    for (let round = 0; round < 10; round++) time(classifier, text);
    long[kind] = {
      wall_clock: costs(Array.from({ length: LONG_ROUNDS }, () => time(classifier, text))),
      cpu: costs(Array.from({ length: LONG_ROUNDS }, () => cpuTime(classifier, text))),
    };
  }
  // Linear: the cost per character stays flat as the message grows. Sizes take turns in each
  // round, so the machine's drift falls on all of them alike; the fastest run shows the trend.
  const sizes = [2_500, 5_000, 10_000, 20_000, 40_000];
  const texts = sizes.map((length) => repeatTo(`${labelledText} `, length));
  const bySize: number[][] = sizes.map(() => []);
  for (let round = 0; round < 45; round++) {
    texts.forEach((text, index) => {
      const timing = time(classifier, text);
      if (round >= 5) bySize[index].push(timing);
    });
  }
  const scaling = Object.fromEntries(
    sizes.map((length, index) => {
      const timings = bySize[index].sort((a, b) => a - b);
      return [
        length,
        {
          p50_ms: ms(percentile(timings, 50)),
          min_ns_per_char: Math.round(timings[0] / length),
          p50_ns_per_char: Math.round(percentile(timings, 50) / length),
        },
      ];
    }),
  );

  const perMessageCosts = costs(perMessage);
  const obfuscatedTexts = messages
    .filter((message) => message.split === 'obfuscated')
    .map((message) => message.text);
  const perObfuscated: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const text of obfuscatedTexts) perObfuscated.push(time(classifier, text));
  }
  const streamed = await streamedModeration(classifier);
  return {
    load_average_at_start: loadAtStart,
    goal: 'p99 <= 0.2 ms per message of chat length; cost per character flat for long messages',
    construction_ms: ms(constructNs),
    labelled_set: {
      messages: messages.length,
      per_split: Object.fromEntries(
        SPLITS.map((split) => [
          split,
          messages.filter((message) => message.split === split).length,
        ]),
      ),
    },
    self_harm_whole_set: quality(messages, classifier),
    self_harm_by_split: Object.fromEntries(
      SPLITS.map((split) => [
        split,
        quality(
          messages.filter((message) => message.split === split),
          classifier,
        ),
      ]),
    ),
    violence_and_sexual_minors_set: {
      messages: moderation.length,
      exactly_right: moderationCorrect,
    },
    cost_per_message: {
      ...perMessageCosts,
      message_length_chars: { p50: percentile(lengths, 50), max: lengths[lengths.length - 1] },
      goal_met: perMessageCosts.p99_ms <= 0.2,
    },
    cost_per_obfuscated_message: costs(perObfuscated),
    streamed_moderation: streamed,
    cost_10000_chars: long,
    cost_by_length: scaling,
  };
}
