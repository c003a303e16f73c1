/** The parts of a personality shared by catalog entries and organization clones. */
export interface PersonalityVoice {
  tone: string;
  formality: 'casual' | 'neutral' | 'formal';
  style_notes: string;
}

/** Templates of the default response engine, by valence; `{emotion}` and `{memory}` are filled in. */
export interface PersonalityReplies {
  first_meeting: string;
  positive: string[];
  negative: string[];
  ambiguous: string[];
  neutral: string[];
  recall: string[];
}

export interface CatalogEntryFile {
  slug: string;
  name: string;
  description: string;
  version: string;
  traits: string[];
  voice: PersonalityVoice;
  system_prompt: string;
  replies: PersonalityReplies;
}
