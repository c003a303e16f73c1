export type Language = 'en' | 'de' | 'fr' | 'es';

/**
 * What a matched phrase means to the rules.
 * - `self_harm`: the speaker's own suicidal or self-harm intent or ideation.
 * - `violence`: intent to seriously harm someone (stab, shoot, poison…), or instructions for it.
 * - `violence_kill`: "kill"/"umbringen"/"tuer"/"matar" aimed at someone. It is the verb of everyday
 *   hyperbole ("I'm going to kill my brother, he ate my cake", "I'll kill you if you eat my fries"),
 *   so it counts only with a weapon named in the message, or with a sign of seriousness or a plan
 *   (`intent`: "I'm not joking", "tomorrow", "I know where he lives") in a message that does not
 *   laugh (`laughter`: lol, haha, mdr, jaja, 😂).
 * - `not_self_harm`, `not_violence`: idioms and contexts that cancel a match (see `scope`).
 * - `distress`: "I can't do this anymore", "ich kann nicht mehr"; required by the weaker signs.
 * - `minor`, `sexual`, `sexual_weak`, `request`, `protective`, `not_sexual`: the parts the
 *   sexual-minors rule combines.
 */
export type Concept =
  | 'self_harm'
  | 'violence'
  | 'violence_kill'
  | 'not_self_harm'
  | 'not_violence'
  | 'minor'
  | 'sexual'
  | 'sexual_weak'
  | 'request'
  | 'protective'
  | 'not_sexual'
  | 'distress'
  | 'weapon'
  | 'intent'
  | 'laughter';

export interface LexiconGroup {
  readonly concept: Concept;
  /** Whose negations apply to the phrases (the four languages share one token stream). */
  readonly language: Language;
  /**
   * `speaker`: the words say who acts ("kill myself", "quiero morir", "je veux"); `subject`: they
   * do not ("want to die", "will sterben"), so the nearest subject before them decides, and a
   * third person ("she wants to…" is another's) or "you" cancels the match. Default `speaker`.
   */
  readonly person?: 'speaker' | 'subject';
  /**
   * For `not_*` concepts: `adjacent` cancels a match it overlaps or directly follows ("die" +
   * "laughing"), `sentence` cancels every match in its sentence (a game's name). Default adjacent.
   */
  readonly scope?: 'adjacent' | 'sentence';
  /** The phrases count only when this concept is also found in the message. */
  readonly requires?: Concept;
  readonly phrases: readonly string[];
}
