import { Injectable } from '@nestjs/common';
import {
  inCanonicalOrder,
  type SafetyCategory,
  type SafetyClassifier,
  type SafetyVerdict,
} from '../safety-categories';
import {
  CLAUSE_LINKS,
  FIRST_PERSON,
  FIRST_PERSON_SUBJECTS,
  COMPLEMENTIZERS,
  MEDIA,
  NEGATION_EXCEPTIONS,
  NEGATIONS,
  REPORTING_VERBS,
  SECOND_PERSON,
  THIRD_PERSON,
  TRAILING_NEGATIONS,
  VOCATIVES,
} from './lexicon/context-words';
import type { Concept, Language, LexiconGroup } from './lexicon/lexicon-types';
import { SELF_HARM_LEXICON } from './lexicon/self-harm.lexicon';
import { SEXUAL_MINORS_LEXICON } from './lexicon/sexual-minors.lexicon';
import { VIOLENCE_LEXICON, VIOLENCE_SETS } from './lexicon/violence.lexicon';
import { type PhraseMatch, PhraseTrie } from './phrase-trie';
import { SENTENCE_BREAK, TextNormalizer, type Token } from './text-normalizer';

const LEXICON: readonly LexiconGroup[] = [
  ...SELF_HARM_LEXICON,
  ...VIOLENCE_LEXICON,
  ...SEXUAL_MINORS_LEXICON,
];

/**
 * How much of a text's end tells whether a sentence break ends it: three dots, a word spelled
 * out a letter at a time ("k.i.l.l."), a closing quotation.
 */
const SENTENCE_END_READ = 200;
/** How far back the rules look: a negation within 3 words, a subject within 8, a reporter within 12. */
const NEGATION_REACH = 3;
const SUBJECT_REACH = 8;
const REPORT_REACH = 12;
/** A minor and a sexual term count together within this many words of each other. */
const SEXUAL_MINORS_REACH = 30;

type Role = 'first' | 'second' | 'third' | 'media';
type Match = PhraseMatch<LexiconGroup>;

/** What one text was found to contain, indexed for the rules. */
interface Reading {
  readonly tokens: Token[];
  readonly quoteStarts: number[];
  readonly quoteEnds: number[];
  /** sentences[i]: which sentence token i belongs to. */
  readonly sentences: Int32Array;
  /** Matches per concept, ordered by start. */
  readonly byConcept: ReadonlyMap<Concept, Match[]>;
  /** Per `not_*` concept, the sentences a sentence-wide match of it cancels. */
  readonly cancelledSentences: ReadonlyMap<Concept, ReadonlySet<number>>;
}

const UMLAUT_SPELLINGS: Record<string, string> = {
  ä: 'ae',
  ö: 'oe',
  ü: 'ue',
  Ä: 'Ae',
  Ö: 'Oe',
  Ü: 'Ue',
};

/**
 * A phrase whose words with an umlaut also match as written without one: "töten" is also
 * "toeten" (found by review). Folding drops the umlaut ("toten"), so both spellings are needed.
 */
function withUmlautSpellings(phrase: string): string {
  return phrase.replace(/[\p{L}']*[äöüÄÖÜ][\p{L}']*\*?/gu, (word) => {
    return `[${word}|${spelledWithoutUmlauts(word)}]`;
  });
}

/** "schülerin" → "schuelerin"; a word without an umlaut as it is. */
function spelledWithoutUmlauts(word: string): string {
  return word.replace(/[äöüÄÖÜ]/g, (umlaut) => UMLAUT_SPELLINGS[umlaut]);
}

/** The matches of `sorted` (ordered by start) that start from `from` to `to`: a binary search. */
function startingBetween(sorted: readonly Match[], from: number, to: number): Match[] {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted[middle].start < from) low = middle + 1;
    else high = middle;
  }
  const found: Match[] = [];
  for (let at = low; at < sorted.length && sorted[at].start <= to; at++) found.push(sorted[at]);
  return found;
}

/**
 * The built-in classifier: offline, deterministic, a phrase lexicon for English, German, French
 * and Spanish plus rules that read the context of each phrase. All four lexicons run on every
 * message (no language detection to get wrong, and mixed-language messages work); negations
 * follow the language of the phrase they deny. See docs/safety.md for what it detects and misses.
 *
 * Everything is compiled once, in the constructor; a classification is one pass of the normaliser,
 * one walk of the phrase trie and checks bounded per match: linear in the text's length.
 */
@Injectable()
export class LocalSafetyClassifier implements SafetyClassifier {
  readonly name = 'local';
  private readonly normalizer: TextNormalizer;
  private readonly trie: PhraseTrie<LexiconGroup>;
  private readonly negations: ReadonlyMap<Language, ReadonlySet<string>>;
  private readonly trailingNegations: ReadonlyMap<Language, ReadonlySet<string>>;
  private readonly allNegations: ReadonlySet<string>;
  private readonly negationExceptions: ReadonlySet<string>;
  private readonly clauseLinks: ReadonlySet<string>;
  private readonly firstPersonSubjects: ReadonlySet<string>;
  private readonly complementizers: ReadonlySet<string>;
  private readonly reportingVerbs: ReadonlySet<string>;
  private readonly vocatives: ReadonlySet<string>;
  private readonly roles: ReadonlyMap<string, Role>;

  constructor() {
    const lexiconNormalizer = new TextNormalizer();
    // Context words too are read with their umlauts typed as two letters ("schuelerin").
    const words = (list: readonly string[]): Set<string> =>
      new Set(
        list
          .flatMap((word) => [word, spelledWithoutUmlauts(word)])
          .map((word) => this.singleWord(lexiconNormalizer, word)),
      );

    this.negations = new Map(
      Object.entries(NEGATIONS).map(([language, list]) => [language as Language, words(list)]),
    );
    this.trailingNegations = new Map(
      Object.entries(TRAILING_NEGATIONS).map(([language, list]) => [
        language as Language,
        words(list),
      ]),
    );
    this.allNegations = new Set([...this.negations.values()].flatMap((set) => [...set]));
    this.negationExceptions = words(NEGATION_EXCEPTIONS);
    this.clauseLinks = words(CLAUSE_LINKS);
    this.firstPersonSubjects = words(FIRST_PERSON_SUBJECTS);
    this.complementizers = words(COMPLEMENTIZERS);
    this.reportingVerbs = words(REPORTING_VERBS);
    this.vocatives = words(VOCATIVES);
    const roles = new Map<string, Role>();
    // Later lists win a shared word: "me" is the speaker, "man" someone else.
    for (const [role, list] of [
      ['media', MEDIA],
      ['third', THIRD_PERSON],
      ['second', SECOND_PERSON],
      ['first', FIRST_PERSON],
    ] as const) {
      for (const word of words(list)) roles.set(word, role);
    }
    this.roles = roles;

    this.trie = new PhraseTrie<LexiconGroup>(
      (literal) => lexiconNormalizer.words(literal),
      (token) => this.allNegations.has(token.text),
      Object.fromEntries(
        Object.entries(VIOLENCE_SETS).map(([name, set]) => [name, withUmlautSpellings(set)]),
      ),
    );
    for (const group of LEXICON) {
      for (const phrase of group.phrases) this.trie.add(withUmlautSpellings(phrase), group);
    }
    this.normalizer = new TextNormalizer(this.trie.vocabulary, this.trie.prefixes);
  }

  async classify(text: string): Promise<SafetyVerdict> {
    return this.classifySync(text);
  }

  classifySync(text: string): SafetyVerdict {
    const reading = this.read(text);
    const found: SafetyCategory[] = [];
    if (this.hasSelfHarm(reading)) found.push('self_harm');
    if (this.hasSexualMinors(reading)) found.push('sexual_minors');
    if (this.hasViolence(reading)) found.push('violence');
    return { categories: inCanonicalOrder(found), decidedBy: 'local' };
  }

  /**
   * Every rule starts from a phrase of the lexicon, and a phrase never crosses a sentence break:
   * text without one adds no category to a clean text it follows (it can only cancel or deny).
   * Only after a break, as this reads one: a streamed reply's gate also cuts after three dots (a
   * pause here) and in a run too long, where "make a..." and " bomb." are one phrase, and the
   * second half passed unread with the first (found by review).
   */
  couldFlagAfter(text: string, before = ''): boolean {
    if (before.trim() !== '' && !this.endsSentence(before)) return true;
    return this.trie.matchAll(this.normalizer.normalize(text).tokens).length > 0;
  }

  /** Whether a sentence break ends `text` as this reads it: a word after it begins a sentence. */
  private endsSentence(text: string): boolean {
    const { tokens } = this.normalizer.normalize(`${text.slice(-SENTENCE_END_READ)} probe`);
    return tokens.at(-1)?.breakBefore === SENTENCE_BREAK;
  }

  private read(text: string): Reading {
    const { tokens, quoteStarts, quoteEnds } = this.normalizer.normalize(text);
    const sentences = new Int32Array(tokens.length);
    let sentence = 0;
    tokens.forEach((token, index) => {
      if (token.breakBefore === SENTENCE_BREAK) sentence++;
      sentences[index] = sentence;
    });
    const byConcept = new Map<Concept, Match[]>();
    const cancelledSentences = new Map<Concept, Set<number>>();
    for (const match of this.trie.matchAll(tokens)) {
      const { concept, scope } = match.value;
      const list = byConcept.get(concept);
      if (list) list.push(match);
      else byConcept.set(concept, [match]);
      if (scope === 'sentence') {
        const cancelled = cancelledSentences.get(concept) ?? new Set<number>();
        cancelled.add(sentences[match.start]);
        cancelledSentences.set(concept, cancelled);
      }
    }
    return { tokens, quoteStarts, quoteEnds, sentences, byConcept, cancelledSentences };
  }

  private hasSelfHarm(reading: Reading): boolean {
    return (reading.byConcept.get('self_harm') ?? []).some(
      (match) =>
        !this.cancelled(match, 'not_self_harm', reading) && this.isOwnStatement(match, reading),
    );
  }

  private hasViolence(reading: Reading): boolean {
    const found = (concept: Concept): boolean => (reading.byConcept.get(concept) ?? []).length > 0;
    const counts = (match: Match): boolean =>
      !this.cancelled(match, 'not_violence', reading) && this.isOwnStatement(match, reading);
    // "Kill" alone is everyday hyperbole: see `violence_kill` in lexicon-types.ts.
    const killIsMeant = found('weapon') || (found('intent') && !found('laughter'));
    return (
      (reading.byConcept.get('violence') ?? []).some(counts) ||
      (killIsMeant && (reading.byConcept.get('violence_kill') ?? []).some(counts))
    );
  }

  /**
   * A minor near a sexual term; or near a weaker term when the message asks for content. A
   * protective context (sex education, puberty, warning signs) clears it, unless content is asked.
   */
  private hasSexualMinors(reading: Reading): boolean {
    const kept = (concept: Concept): Match[] =>
      (reading.byConcept.get(concept) ?? []).filter(
        (match) => !this.cancelled(match, 'not_sexual', reading),
      );
    const minors = reading.byConcept.get('minor') ?? [];
    if (minors.length === 0) return false;
    const sexual = kept('sexual');
    const weak = kept('sexual_weak');
    const requests = reading.byConcept.get('request') ?? [];
    const protective = reading.byConcept.get('protective') ?? [];
    const near = (list: Match[], minor: Match): boolean =>
      startingBetween(
        list,
        minor.start - SEXUAL_MINORS_REACH - this.trie.longestMatch,
        minor.end + SEXUAL_MINORS_REACH - 1,
      ).some((match) => match.end > minor.start - SEXUAL_MINORS_REACH);
    return minors.some((minor) => {
      const asks = near(requests, minor);
      const sexualNear = near(sexual, minor) || (asks && near(weak, minor));
      return sexualNear && (asks || !near(protective, minor));
    });
  }

  /**
   * Whether an idiom or context cancels the match: "die laughing", a game's final boss. Matches
   * span at most `longestMatch` tokens, so only a window of the sorted list is looked at: the
   * checks stay linear overall even in a long message full of phrases.
   */
  private cancelled(match: Match, by: Concept, reading: Reading): boolean {
    if (reading.cancelledSentences.get(by)?.has(reading.sentences[match.start])) return true;
    // An idiom overlapping the match, or starting at most one word after it.
    return startingBetween(
      reading.byConcept.get(by) ?? [],
      match.start - this.trie.longestMatch,
      match.end + 1,
    ).some(
      (other) =>
        other.value.scope !== 'sentence' &&
        other.end > match.start &&
        !this.holds(match, other) &&
        this.sameSentence(other, match, reading),
    );
  }

  /**
   * Whether `match` holds all of `idiom` and more: the longer phrase is the reading ("don't want
   * to live in this world" is not the idiom "live in"; "cut myself with a razor" is not "cut
   * myself with a" knife while cooking), found by review.
   */
  private holds(match: Match, idiom: Match): boolean {
    return (
      match.start <= idiom.start &&
      idiom.end <= match.end &&
      match.end - match.start > idiom.end - idiom.start
    );
  }

  private sameSentence(a: Match, b: Match, reading: Reading): boolean {
    return reading.sentences[a.start] === reading.sentences[b.start];
  }

  /**
   * Whether the match states the speaker's own intent: not denied, not someone else's (by subject,
   * by a reporting verb, by quotation marks), and with what it requires nearby.
   */
  private isOwnStatement(match: Match, reading: Reading): boolean {
    const group = match.value;
    if (group.requires && !reading.byConcept.has(group.requires)) return false;
    // "no estoy [pensando en suicidarme]": a denied phrase denies the phrases inside it.
    const containing = startingBetween(
      reading.byConcept.get(group.concept) ?? [],
      match.end - this.trie.longestMatch,
      match.start,
    ).filter((other) => other.end >= match.end);
    if (containing.some((other) => this.isNegated(other, reading))) return false;
    if (reading.tokens[match.start].quote !== 0 && this.isQuotedFromOthers(match, reading)) {
      return false;
    }
    const subject = this.nearestRole(reading, match.start);
    if (group.person === 'subject' && subject !== undefined && subject !== 'first') return false;
    return !this.isReported(reading, match.start);
  }

  private isNegated(match: Match, reading: Reading): boolean {
    const { tokens } = reading;
    const language = match.value.language;
    const negations = this.negations.get(language);
    if (!negations) return false;
    // A phrase with its own negation ("don't want to live", "no quiero vivir") carries its polarity.
    for (let at = match.start; at < match.end; at++) {
      if (negations.has(tokens[at].text)) return false;
    }
    for (let at = match.start - 1; at >= 0 && match.start - at <= NEGATION_REACH; at--) {
      if (tokens[at + 1].breakBefore !== 0 || this.clauseLinks.has(tokens[at].text)) break;
      // "I'm not OK I want to die": the speaker begins a clause of their own (found by review).
      if (this.beginsOwnClause(tokens, at)) break;
      if (negations.has(tokens[at].text) && !this.negationExceptions.has(tokens[at + 1].text)) {
        return true;
      }
    }
    const trailing = this.trailingNegations.get(language);
    if (trailing) {
      for (let at = match.end; at < tokens.length && at < match.end + 2; at++) {
        if (tokens[at].breakBefore !== 0) break;
        if (trailing.has(tokens[at].text)) return true;
      }
    }
    return false;
  }

  /** The role of the nearest person word before `start` in its sentence and quotation, if any. */
  private nearestRole(reading: Reading, start: number): Role | undefined {
    const { tokens } = reading;
    for (let at = start - 1; at >= 0 && start - at <= SUBJECT_REACH; at--) {
      if (
        tokens[at + 1].breakBefore === SENTENCE_BREAK ||
        tokens[at].quote !== tokens[start].quote
      ) {
        break;
      }
      const role = this.roles.get(tokens[at].text);
      if (role !== undefined && !this.isVocative(tokens, at)) {
        return role === 'media' ? 'third' : role;
      }
    }
    return undefined;
  }

  /**
   * "bro, …", "man I …": a person word said to the reader, first in its sentence. Not before a
   * comma elsewhere: "my girl, who is 15, wanted to die" is about her (review of the change).
   */
  private isVocative(tokens: Reading['tokens'], at: number): boolean {
    return (
      this.vocatives.has(tokens[at].text) && (at === 0 || tokens[at].breakBefore === SENTENCE_BREAK)
    );
  }

  /**
   * "The character says I want to die", "my therapist asked if I had suicidal thoughts": a
   * reporting verb before the statement whose own subject is someone else.
   */
  private isReported(reading: Reading, from: number): boolean {
    const { tokens } = reading;
    for (let at = from - 1; at >= 0 && from - at <= REPORT_REACH; at--) {
      if (
        tokens[at + 1].breakBefore === SENTENCE_BREAK ||
        tokens[at].quote !== tokens[from].quote
      ) {
        return false;
      }
      if (this.reportingVerbs.has(tokens[at].text)) {
        const reporter = this.nearestRole(reading, at);
        return reporter !== undefined && reporter !== 'first';
      }
      // What was said ends where the speaker's own clause begins: "she said we're done and I
      // want to kill myself", "he said he's leaving, I'm going to…" (found by review).
      if (this.clauseLinks.has(tokens[at].text)) return false;
      if (tokens[at + 1].breakBefore !== 0 && this.beginsOwnClause(tokens, at + 1)) return false;
    }
    return false;
  }

  /** Whether the token at `at` is the speaker as a subject not introduced by "that" and its kin. */
  private beginsOwnClause(tokens: Reading['tokens'], at: number): boolean {
    return (
      this.firstPersonSubjects.has(tokens[at].text) &&
      !(at > 0 && this.complementizers.has(tokens[at - 1].text))
    );
  }

  /**
   * A quotation is someone else's when a work or another person is named around it ("the song
   * goes", "she said", "…", he wrote); one the speaker introduces ("I keep thinking") or that
   * nobody introduces counts as the speaker's.
   */
  private isQuotedFromOthers(match: Match, reading: Reading): boolean {
    const { tokens, quoteStarts, quoteEnds } = reading;
    const quote = tokens[match.start].quote;
    const first = quoteStarts[quote];
    let speaker: Role | undefined;
    for (let at = first - 1; at >= 0 && first - at <= REPORT_REACH; at--) {
      if (tokens[at + 1].breakBefore === SENTENCE_BREAK) break;
      const role = this.roles.get(tokens[at].text);
      if (role === 'media') return true;
      if (role !== undefined) speaker = role;
    }
    if (speaker !== undefined) return speaker !== 'first';
    const after = quoteEnds[quote];
    for (let at = after; at < tokens.length && at < after + 6; at++) {
      if (at > after && tokens[at].breakBefore === SENTENCE_BREAK) break;
      const role = this.roles.get(tokens[at].text);
      if (role === 'media' || role === 'third' || this.reportingVerbs.has(tokens[at].text)) {
        return true;
      }
    }
    return false;
  }

  private singleWord(normalizer: TextNormalizer, word: string): string {
    const words = normalizer.words(word);
    if (words.length !== 1) throw new Error(`context word "${word}" is not one word`);
    return words[0];
  }
}
