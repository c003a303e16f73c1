import { learnedFact } from '../../memory/dto/fact.dto';
import { hasVisibleText } from '../../common/validation/visible-text';
import { MAX_LEARNED_FACTS } from './response-engine';

/** Every character a reader may break a line at: a value ends there (a fact is one line). */
const BREAK = String.raw`\n\r\u0085\u2028\u2029`;
/** A character of a clause (any but the marks that end one), and one a value may begin with. */
const CLAUSE = String.raw`[^.,;:!?${BREAK}]`;
const WORD_START = String.raw`[^\s.,;:!?${BREAK}]`;
/**
 * Text of a clause that begins with no white space, up to `max` characters: the white space
 * before it is all the `\s+` ahead's, so a run of spaces is split one way only. Where a value
 * could begin with spaces, "my favourite" and 8,000 of them tried every split of the run against
 * every length of the value, 2.3 s of the event loop (hostile review).
 */
const clause = (max: number) => String.raw`(${WORD_START}${CLAUSE}{0,${max - 1}}?)`;
/** What a clause may hold after the pattern: up to the end of the clause, at most 60 characters. */
const VALUE = clause(60);
const END = String.raw`(?=[^\S${BREAK}]*(?:[.,;:!${BREAK}]|\band\b|\bbut\b|\bbecause\b|$))`;

/**
 * First-person statements the local engine learns, and how it writes them down (third person).
 * Deterministic and English only: the `openai` engine learns any statement in any language.
 */
const PATTERNS: Array<{ pattern: RegExp; fact: (...values: string[]) => string }> = [
  {
    pattern: new RegExp(String.raw`\bmy name(?: is|'s)\s+${VALUE}${END}`, 'iu'),
    fact: (name) => `Their name is ${name}.`,
  },
  {
    pattern: new RegExp(String.raw`\bi live in\s+${VALUE}${END}`, 'iu'),
    fact: (place) => `They live in ${place}.`,
  },
  {
    pattern: new RegExp(String.raw`\bi work as\s+${VALUE}${END}`, 'iu'),
    fact: (job) => `They work as ${job}.`,
  },
  {
    pattern: new RegExp(String.raw`\bi(?: am|'m) allergic to\s+${VALUE}${END}`, 'iu'),
    fact: (allergen) => `They are allergic to ${allergen}.`,
  },
  {
    pattern: new RegExp(
      String.raw`\bmy fav(?:o|ou)rite\s+${clause(30)}\s+is\s+${VALUE}${END}`,
      'iu',
    ),
    fact: (thing, value) => `Their favourite ${thing} is ${value}.`,
  },
  {
    pattern: new RegExp(
      String.raw`\bi(?: have|'ve got| have got)\s+(an?\s+${WORD_START}${CLAUSE}{0,29}?)\s+(called|named)\s+${VALUE}${END}`,
      'iu',
    ),
    fact: (thing, verb, name) => `They have ${thing} ${verb} ${name}.`,
  },
];

/** A value that says the opposite or nothing: "my name is not …", "I live in a flat?" */
const NOT_A_VALUE = /^(?:not|never|no)\b/i;

/** A sentence and the marks that end it; a line break ends one too. */
const SENTENCE = new RegExp(String.raw`[^.!?${BREAK}]+[.!?${BREAK}]*`, 'gu');

/**
 * The facts the user states about themselves in `message`, in the order stated, at most
 * MAX_LEARNED_FACTS, each one line (learnedFact). Questions are skipped ("do I live in Berlin?"
 * states nothing).
 */
export function extractFacts(message: string): string[] {
  const facts: string[] = [];
  // Sentences, each with the mark that ends it: a question states nothing.
  for (const sentence of message.match(SENTENCE) ?? []) {
    if (sentence.trimEnd().endsWith('?')) continue;
    for (const { pattern, fact } of PATTERNS) {
      const match = pattern.exec(sentence);
      if (!match) continue;
      const values = match.slice(1).map((value) => value.trim());
      // A value of invisible characters alone ("my name is \u200b") states nothing.
      if (values.some((value) => !hasVisibleText(value) || NOT_A_VALUE.test(value))) continue;
      const statement = learnedFact(fact(...values));
      if (statement === undefined) continue;
      if (!facts.includes(statement)) facts.push(statement);
      if (facts.length === MAX_LEARNED_FACTS) return facts;
    }
  }
  return facts;
}
