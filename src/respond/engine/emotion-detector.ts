import type { EmotionDefinition } from '../../vocabularies/entities/emotion-vocabulary.entity';

/**
 * The local engine's emotion detection: deterministic, offline, a few hundred phrases.
 *
 * What it matches: the vocabulary's own `cues`, plus a supplementary lexicon (below) keyed by
 * emotion name, because the published cue lists are short and fixed ("I finally got the job!" has
 * no cue of joy). A lexicon entry counts only for a name the given vocabulary contains: its own, or
 * else the first of its `fallback` names the vocabulary has (1.0.0 has no `gratitude`: "thank you"
 * counts for `joy` there); with none of them it still claims its words, so "dying to see it" never
 * reads as a death.
 *
 * How: the message and every phrase go through the same normalisation: lower case, contractions
 * expanded ("I'm" → "i am", "don't" → "do not", also the apostrophe-less "im", "dont"), words
 * reduced to a crude stem ("got" → "get", "died"/"dying" → "die", "cried" → "cry").
 * Phrases are matched as whole stemmed words, leftmost-longest: at each position the longest
 * matching phrase wins ("dying laughing" over "dying"); between equally long ones the vocabulary's
 * cues win over the lexicon. A match is discarded when a negation ("not", "never", "no"…) precedes
 * it by at most three words in the same clause ("I'm not happy" is not joy), except when the
 * negation bears on "stop"/"help" ("I can't stop crying" is sadness).
 *
 * The emotion with the most matches wins (ties: the longer matched phrase, then vocabulary order).
 * Intensity starts at the emotion's arousal and grows with extra matches, intensifiers, exclamation
 * marks and shouting, capped at 1. No match: "neutral" (when the vocabulary has it) at intensity 0.
 */
export interface DetectedEmotion {
  emotion: EmotionDefinition | undefined;
  name: string;
  intensity: number;
}

interface LexiconEntry {
  /** Names to count for instead, in order, when the vocabulary lacks the entry's own. */
  fallback?: string[];
  phrases: string[];
}

// prettier-ignore
const LOST_ONES = [
  'mom', 'mum', 'dad', 'mother', 'father', 'wife', 'husband', 'son', 'daughter', 'brother',
  'sister', 'grandma', 'grandpa', 'grandmother', 'grandfather', 'friend', 'best friend', 'baby',
  'dog', 'cat',
];

/** Phrases (any inflection) the published cue lists miss, keyed by the emotion they signal. */
// prettier-ignore
const LEXICON: Record<string, LexiconEntry> = {
  joy: {
    phrases: [
      'glad', 'joy', 'happier', 'happiest', 'great news', 'good news', 'best news', 'best day',
      'great day', 'feel great', 'feel good', 'so great', 'this is great', 'that is great',
      'wonderful', 'awesome', 'fantastic', 'amazing', 'hooray', 'hurray', 'smile', 'celebrate',
      'blessed', 'lucky', 'win', 'get the job', 'get a job', 'get hired', 'get promoted',
      'get accepted', 'get engaged', 'get married', 'pass the exam', 'pass my exam',
      'pass the test', 'pass my test', 'could not be happier', 'never been happier',
      'never been so happy',
    ],
  },
  amusement: {
    fallback: ['joy'],
    phrases: [
      'haha', 'hahaha', 'lol', 'hilarious', 'funny', 'laugh', 'dying laughing', 'crack up',
    ],
  },
  excitement: {
    fallback: ['joy'],
    phrases: ['excite', 'pumped', 'hyped', 'woohoo', 'stoked'],
  },
  gratitude: {
    fallback: ['joy'],
    phrases: ['thank', 'thank you', 'grateful', 'thankful', 'appreciate', 'so kind of you'],
  },
  love: {
    fallback: ['joy'],
    phrases: [
      'love', 'adore', 'beloved', 'affection', 'fond of', 'crazy about', 'mean the world to me',
    ],
  },
  desire: {
    fallback: ['anticipation'],
    phrases: ['would love to', 'die to'],
  },
  sadness: {
    phrases: [
      'i miss', 'miss you', 'miss her', 'miss him', 'miss them', 'miss my', 'miss home',
      'unhappy', 'upset', 'sorrow', 'heartbreak', 'broken heart', 'sob', 'weep', 'wept', 'tears',
      'alone', 'feel down', 'feel low', 'feel empty', 'empty inside', 'bad day', 'awful day',
      'terrible day', 'worst day', 'rough day', 'hurt', 'dumped', 'break up', 'lose my job',
      'get fired', 'fail',
    ],
  },
  grief: {
    fallback: ['sadness'],
    phrases: [
      'die', 'death', 'pass away', 'funeral', 'mourn', 'rest in peace', 'condolence',
      ...LOST_ONES.map((one) => `lose my ${one}`),
    ],
  },
  anger: {
    phrases: [
      'anger', 'rage', 'fury', 'outrageous', 'hate', 'mad', 'pissed', 'irate', 'how dare',
      'lose my temper', 'what the hell',
    ],
  },
  annoyance: {
    fallback: ['anger'],
    phrases: ['annoy', 'irritate', 'frustrate', 'sick and tired', 'get on my nerves'],
  },
  fear: {
    phrases: ['fear', 'terror', 'horrify', 'panic', 'nightmare', 'phobia', 'creepy'],
  },
  nervousness: {
    fallback: ['fear'],
    phrases: ['worry', 'nervous', 'anxious', 'anxiety', 'stress', 'uneasy', 'on edge'],
  },
  surprise: {
    phrases: [
      'surprise', 'astonish', 'speechless', 'unbelievable', 'did not expect', 'never expect',
      'never see that coming', 'out of the blue', 'who knew', 'oh my god', 'oh my gosh',
      'taken aback', 'jaw dropped',
    ],
  },
  disgust: {
    phrases: [
      'ew', 'repulse', 'vomit', 'puke', 'throw up', 'nauseous', 'stink', 'smell awful',
      'smell terrible', 'rotten', 'filthy', 'foul',
    ],
  },
};

const INTENSIFIERS = new Set([
  'so',
  'very',
  'really',
  'extremely',
  'totally',
  'incredibly',
  'super',
]);
const NEGATIONS = new Set([
  'not',
  'no',
  'never',
  'nothing',
  'nobody',
  'none',
  'neither',
  'nor',
  'without',
  'hardly',
]);
/** "can't stop crying", "couldn't help laughing": the negation bears on the verb, not the mood. */
const NEGATION_BREAKERS = new Set(['stop', 'help']);
const NEGATION_REACH = 3;
/** A clause ends at punctuation and at "but": "I'm not sad, I'm happy" is joy. */
const CLAUSE_END = '|';

/** Chat spellings without the apostrophe. */
const BARE_CONTRACTIONS: Record<string, string> = {
  im: 'i am',
  ive: 'i have',
  youre: 'you are',
  thats: 'that is',
  dont: 'do not',
  doesnt: 'does not',
  didnt: 'did not',
  isnt: 'is not',
  wasnt: 'was not',
  arent: 'are not',
  werent: 'were not',
  cant: 'can not',
  couldnt: 'could not',
  wont: 'will not',
  wouldnt: 'would not',
  shouldnt: 'should not',
  havent: 'have not',
  hasnt: 'has not',
};

const IRREGULAR: Record<string, string> = {
  got: 'get',
  gotten: 'get',
  died: 'die',
  dies: 'die',
  dying: 'die',
  lost: 'lose',
  won: 'win',
  broke: 'break',
  broken: 'break',
  felt: 'feel',
  made: 'make',
  saw: 'see',
  seen: 'see',
  fell: 'fall',
  fallen: 'fall',
  thought: 'think',
  knew: 'know',
  took: 'take',
  taken: 'take',
  threw: 'throw',
  thrown: 'throw',
};

interface Token {
  /** The normalised word, or CLAUSE_END. */
  word: string;
  stem: string;
}

interface Phrase {
  stems: string[];
  /** The emotion it counts for in this vocabulary; undefined: it only claims its words. */
  emotion: EmotionDefinition | undefined;
  fromCues: boolean;
  length: number;
}

interface LexiconPhrase {
  stems: string[];
  names: string[];
  length: number;
}

const LEXICON_PHRASES: LexiconPhrase[] = Object.entries(LEXICON).flatMap(([name, entry]) =>
  entry.phrases.map((text) => ({
    stems: tokenize(text).map((token) => token.stem),
    names: [name, ...(entry.fallback ?? [])],
    length: text.length,
  })),
);

/** A compiled index per vocabulary: published vocabularies never change, so it is built once. */
const indexes = new WeakMap<EmotionDefinition[], Map<string, Phrase[]>>();

export function detectEmotion(message: string, emotions: EmotionDefinition[]): DetectedEmotion {
  const tokens = tokenize(message);
  const index = indexFor(emotions);
  const hits = new Map<EmotionDefinition, { count: number; longest: number }>();
  for (let at = 0; at < tokens.length;) {
    const matches = matchesAt(tokens, at, index);
    if (matches.length === 0) {
      at++;
      continue;
    }
    if (!isNegated(tokens, at)) {
      const counted = new Set<EmotionDefinition>();
      for (const phrase of matches) {
        if (!phrase.emotion || counted.has(phrase.emotion)) continue;
        counted.add(phrase.emotion);
        const hit = hits.get(phrase.emotion) ?? { count: 0, longest: 0 };
        hits.set(phrase.emotion, {
          count: hit.count + 1,
          longest: Math.max(hit.longest, phrase.length),
        });
      }
    }
    at += matches[0].stems.length;
  }

  let best: { emotion: EmotionDefinition; count: number; longest: number } | undefined;
  for (const emotion of emotions) {
    const hit = hits.get(emotion);
    if (!hit) continue;
    if (
      !best ||
      hit.count > best.count ||
      (hit.count === best.count && hit.longest > best.longest)
    ) {
      best = { emotion, ...hit };
    }
  }
  if (!best) {
    const neutral = emotions.find((emotion) => emotion.name === 'neutral');
    return { emotion: neutral, name: neutral?.name ?? 'neutral', intensity: 0 };
  }
  const words = tokens.filter((token) => token.word !== CLAUSE_END);
  const intensifiers = words.filter((token) => INTENSIFIERS.has(token.word)).length;
  const exclamations = (message.match(/!/g) ?? []).length;
  const shouted = message.split(/\s+/).filter((word) => /^[A-Z]{3,}$/.test(word)).length;
  const intensity =
    best.emotion.arousal +
    0.1 * (best.count - 1) +
    0.08 * Math.min(intensifiers, 3) +
    0.05 * Math.min(exclamations, 3) +
    0.05 * Math.min(shouted, 3);
  return { emotion: best.emotion, name: best.emotion.name, intensity: round(clamp(intensity)) };
}

/** The longest phrases matching at `at`; the vocabulary's cues only, when one of them matches. */
function matchesAt(tokens: Token[], at: number, index: Map<string, Phrase[]>): Phrase[] {
  let matches: Phrase[] = [];
  for (const phrase of index.get(tokens[at].stem) ?? []) {
    if (!phrase.stems.every((stem, i) => tokens[at + i]?.stem === stem)) continue;
    const current = matches[0]?.stems.length ?? 0;
    if (phrase.stems.length > current) matches = [phrase];
    else if (phrase.stems.length === current) matches.push(phrase);
  }
  return matches.some((phrase) => phrase.fromCues)
    ? matches.filter((phrase) => phrase.fromCues)
    : matches;
}

function isNegated(tokens: Token[], at: number): boolean {
  for (let i = at - 1; i >= 0 && i >= at - NEGATION_REACH; i--) {
    const word = tokens[i].word;
    if (word === CLAUSE_END) return false;
    if (NEGATIONS.has(word) && !NEGATION_BREAKERS.has(tokens[i + 1].stem)) return true;
  }
  return false;
}

function indexFor(emotions: EmotionDefinition[]): Map<string, Phrase[]> {
  const cached = indexes.get(emotions);
  if (cached) return cached;
  const byName = new Map(emotions.map((emotion) => [emotion.name, emotion]));
  const phrases: Phrase[] = emotions.flatMap((emotion) =>
    emotion.cues.map((cue) => ({
      stems: tokenize(cue).map((token) => token.stem),
      emotion,
      fromCues: true,
      length: cue.length,
    })),
  );
  for (const { stems, names, length } of LEXICON_PHRASES) {
    const name = names.find((candidate) => byName.has(candidate));
    phrases.push({ stems, emotion: name ? byName.get(name) : undefined, fromCues: false, length });
  }
  const index = new Map<string, Phrase[]>();
  for (const phrase of phrases) {
    if (phrase.stems.length === 0) continue;
    const first = phrase.stems[0];
    const list = index.get(first);
    if (list) list.push(phrase);
    else index.set(first, [phrase]);
  }
  indexes.set(emotions, index);
  return index;
}

function tokenize(text: string): Token[] {
  const normalised = text
    .toLowerCase()
    .replace(/[’‘`]/g, "'")
    .replace(/\bcan't\b/g, 'can not')
    .replace(/\bwon't\b/g, 'will not')
    .replace(/\bain't\b/g, 'is not')
    .replace(/n't\b/g, ' not')
    .replace(/'m\b/g, ' am')
    .replace(/'re\b/g, ' are')
    .replace(/'ve\b/g, ' have')
    .replace(/'ll\b/g, ' will')
    .replace(/'d\b/g, ' would')
    .replace(/\blet's\b/g, 'let us')
    .replace(/\b(it|that|what|there|here|he|she|who|where|how|this)'s\b/g, '$1 is')
    // Possessives and the rest: "dog's" is "dogs", stemmed to "dog".
    .replace(/'/g, '')
    .replace(/\p{L}+/gu, (word) => BARE_CONTRACTIONS[word] ?? word);
  const tokens: Token[] = [];
  for (const [piece] of normalised.matchAll(/[\p{L}\p{N}]+|[.,!?;:\n]+/gu)) {
    if (/^[\p{L}\p{N}]/u.test(piece) && piece !== 'but') {
      tokens.push({ word: piece, stem: stem(piece) });
    } else if (tokens.at(-1)?.word !== CLAUSE_END) {
      tokens.push({ word: CLAUSE_END, stem: CLAUSE_END });
    }
  }
  return tokens;
}

/**
 * A crude English stem, the same for a word's usual inflections: "cries"/"cried"/"crying" → "cry",
 * "loves"/"loved"/"loving" → "love", "stunned" → "stun", "sadness" → "sad", "got" → "get". It
 * only has to agree with itself: phrases and messages are stemmed alike.
 */
function stem(word: string): string {
  const irregular = IRREGULAR[word];
  if (irregular) return stem(irregular);
  if (word.length <= 3) return word;
  let base = word;
  if (base.endsWith('iness')) base = `${base.slice(0, -5)}y`;
  else if (base.endsWith('ness')) base = base.slice(0, -4);
  else if (/i(es|ed)$/.test(base)) base = `${base.slice(0, -3)}y`;
  else if (/(ing|ed)$/.test(base)) base = withoutEnding(base.replace(/(ing|ed)$/, ''), base);
  else if (/(sh|ch|x|ss|z)es$/.test(base)) base = base.slice(0, -2);
  else if (/[^sui]s$/.test(base)) base = base.slice(0, -1);
  return base.length > 4 && base.endsWith('e') ? base.slice(0, -1) : base;
}

/** What is left of an -ed/-ing word: "stopped" → "stop", "loved" → "love", "need" stays. */
function withoutEnding(cut: string, word: string): string {
  if (cut.length < 3 || !/[aeiouy]/.test(cut)) return word;
  if (cut.length >= 4 && /([bdgmnprt])\1$/.test(cut)) return cut.slice(0, -1);
  // A short consonant-vowel-consonant stem lost its "e": "hated" is "hate", not "hat".
  return /^[^aeiou][aeiou][^aeiouwxy]$/.test(cut) ? `${cut}e` : cut;
}

const clamp = (value: number) => Math.min(1, Math.max(0, value));
/** Two decimals: intensities are reported as 0.72, not 0.7199999. */
export const round = (value: number) => Math.round(value * 100) / 100;
