/** What the safety checks detect (docs/safety.md), in the order verdicts list them. */
export const SAFETY_CATEGORIES = ['self_harm', 'sexual_minors', 'violence'] as const;
export type SafetyCategory = (typeof SAFETY_CATEGORIES)[number];

export const SAFETY_ACTIONS = ['none', 'crisis_response', 'blocked', 'flagged'] as const;
export type SafetyAction = (typeof SAFETY_ACTIONS)[number];

/** The verdict a memory keeps (its `safety` column): what its text held, what was done about it. */
export interface MemorySafety {
  flagged: boolean;
  categories: SafetyCategory[];
  action: SafetyAction;
}

export type SafetyClassifierName = 'local' | 'openai';

export interface SafetyVerdict {
  /** Detected categories, in the order of SAFETY_CATEGORIES, without duplicates; empty = clean. */
  readonly categories: SafetyCategory[];
  /**
   * Which classifier decided: the OpenAI one answers `local` when its endpoint failed, timed out
   * or answered something unusable and the local classifier decided instead.
   */
  readonly decidedBy: SafetyClassifierName;
}

export interface SafetyClassifyOptions {
  /** The caller's: when it aborts (the client left), a classification still running rejects. */
  signal?: AbortSignal;
}

export interface SafetyClassifier {
  readonly name: SafetyClassifierName;
  classify(text: string, options: SafetyClassifyOptions): Promise<SafetyVerdict>;
  /**
   * Whether `text`, following `before` (a text this classifier found clean, cut wherever its
   * reader cut it), could make the two harmful; false lets a caller that classifies a reply as
   * it streams skip reading them together. The local classifier answers from its lexicon (no
   * phrase of it after a sentence break, nothing to add); a classifier that cannot tell leaves it
   * out.
   */
  couldFlagAfter?(text: string, before: string): boolean;
}

/** The categories present in `found`, in canonical order and without duplicates. */
export function inCanonicalOrder(found: Iterable<SafetyCategory>): SafetyCategory[] {
  const present = new Set(found);
  return SAFETY_CATEGORIES.filter((category) => present.has(category));
}

/** Injection token of the classifier replies are checked with (SAFETY_CLASSIFIER picks it). */
export const SAFETY_CLASSIFIER = Symbol('SAFETY_CLASSIFIER');
