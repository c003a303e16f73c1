import type { Language } from './lexicon-types';

/**
 * Single words the rules read around a match, written as people type them (they go through the
 * text normaliser). All four languages' lists apply to every message, except negations, which
 * follow the language of the matched phrase.
 */

/** Words that negate what follows in their clause ("I would never…", "no quiero…"). */
// prettier-ignore
export const NEGATIONS: Record<Language, readonly string[]> = {
  en: [
    'not', 'never', 'nor', 'neither', "don't", "doesn't", "didn't", "won't", "wouldn't", "can't",
    'cannot', "couldn't", "shouldn't", "isn't", "aren't", "wasn't", "weren't", "ain't", "haven't",
    "hasn't", "hadn't",
  ],
  de: ['nicht', 'nie', 'niemals', 'kein', 'keine', 'keinen', 'keinem', 'keiner', 'keinesfalls', 'nimmer'],
  // "ne" alone negates nothing in spoken French ("je ne veux plus vivre" is not a denial).
  fr: ['pas', 'jamais', 'aucun', 'aucune', 'nullement', 'guère'],
  es: ['no', 'nunca', 'jamás', 'tampoco', 'ni'],
};

/** A negation followed by one of these is not a denial: "not sure", "kann nicht mehr". */
// prettier-ignore
export const NEGATION_EXCEPTIONS: readonly string[] = [
  'sure', 'longer', 'stop', 'help', 'know', 'care', 'take', 'cope', 'handle', 'deal', 'sleep',
  'eat', 'breathe', 'mehr', 'nur', 'sicher', 'puedo', 'aguanto', 'soporto', 'sé', 'sais',
];

/** Negations that also deny what precedes them: "je me tuerai jamais", "ich ritze mich nicht". */
export const TRAILING_NEGATIONS: Partial<Record<Language, readonly string[]>> = {
  fr: ['pas', 'jamais'],
  de: ['nicht', 'nie', 'niemals'],
};

/** Words that end a negation's reach inside a sentence: "I'm not OK but I want to die". */
// prettier-ignore
export const CLAUSE_LINKS: readonly string[] = [
  'but', 'and', 'so', 'because', 'aber', 'und', 'weil', 'denn', 'mais', 'et', 'car', 'parce',
  'pero', 'y', 'porque', 'sino',
];

/** The speaker as subject or object. */
// prettier-ignore
export const FIRST_PERSON: readonly string[] = [
  'i', "i'm", "i've", "i'd", 'me', 'myself', 'ich', 'mich', 'mir', 'je', 'moi', 'yo',
];

/**
 * The speaker as the subject of a new clause: between a negation or a reporting verb and a
 * phrase, one begins the speaker's own statement ("I'm not OK I want to die", "he said he's
 * leaving, I'm going to kill myself"), unless a complementizer introduces it ("not that I…").
 */
// prettier-ignore
export const FIRST_PERSON_SUBJECTS: readonly string[] = [
  'i', "i'm", "i've", "i'd", 'ich', 'je', 'yo',
];

/** Words that make the clause after them part of the one before: "not that I want to die". */
// prettier-ignore
export const COMPLEMENTIZERS: readonly string[] = ['that', 'if', 'dass', 'ob', 'que', 'si'];

/** The one spoken to: the companion, in a question or a joke ("do you want to die?"). */
// prettier-ignore
export const SECOND_PERSON: readonly string[] = [
  'you', "you're", 'yourself', 'du', 'dich', 'dir', 'tu', 'toi', 'te', 'vous', 'usted', 'ustedes',
  'vos',
];

/** Someone else: "my sister says she wants to die" is concern for her, not the user's own crisis. */
// prettier-ignore
export const THIRD_PERSON: readonly string[] = [
  // English
  'he', 'she', 'they', 'him', 'her', 'them', 'his', 'hers', 'their', "he's", "she's", "they're",
  "he'd", "she'd", "they'd", "he'll", "she'll", "they'll", 'someone', 'somebody', 'anyone',
  'anybody', 'people', 'person', 'man', 'woman', 'guy', 'girl', 'boy', 'kid', 'kids', 'child',
  'children', 'teen', 'teenager', 'teenagers', 'friend', 'friends', 'bestie', 'bff', 'sister',
  'brother', 'sis', 'bro', 'mom', 'mum', 'mother', 'mama', 'dad', 'father', 'parent', 'parents',
  'son', 'daughter', 'cousin', 'aunt', 'uncle', 'grandma', 'grandpa', 'grandmother',
  'grandfather', 'granny', 'nan', 'boyfriend', 'girlfriend', 'bf', 'gf', 'husband', 'wife',
  'partner', 'ex', 'roommate', 'classmate', 'coworker', 'colleague', 'boss', 'neighbor',
  'neighbour', 'teacher', 'student', 'patient', 'patients', 'client', 'doctor', 'therapist',
  'nurse', 'stranger', 'singer', 'rapper', 'actor', 'actress', 'author', 'writer', 'narrator',
  'protagonist', 'hero', 'heroine', 'villain', 'character', 'characters', 'men', 'women',
  // German
  'er', 'sie', 'ihn', 'ihm', 'ihr', 'jemand', 'jemanden', 'man', 'leute', 'mensch', 'menschen',
  'freund', 'freundin', 'freunde', 'kumpel', 'bruder', 'schwester', 'mutter', 'mutti', 'vater',
  'eltern', 'sohn', 'tochter', 'kind', 'kinder', 'cousine', 'tante', 'onkel', 'oma', 'opa',
  'mann', 'frau', 'partnerin', 'kollege', 'kollegin', 'chef', 'chefin', 'nachbar', 'nachbarin',
  'lehrer', 'lehrerin', 'schüler', 'schülerin', 'patientin', 'figur', 'held', 'heldin',
  'hauptfigur', 'erzähler', 'junge', 'mädchen', 'typ', 'sänger', 'sängerin', 'autor',
  // French
  'il', 'elle', 'ils', 'elles', 'lui', 'eux', 'leur', 'gens', 'ami',
  'amie', 'amis', 'pote', 'potes', 'copain', 'copine', 'frère', 'sœur', 'mère', 'maman', 'père',
  'fils', 'fille', 'enfant', 'enfants', 'tante', 'oncle', 'mari', 'femme', 'homme', 'mec', 'meuf',
  'collègue', 'voisin', 'voisine', 'prof', 'élève', 'patiente', 'personnage', 'héros', 'héroïne',
  'narrateur', 'auteur', 'chanteur', 'chanteuse', 'docteur', 'médecin', 'psy',
  // Spanish
  'él', 'ella', 'ellos', 'ellas', 'alguien', 'gente', 'persona', 'amigo', 'amiga', 'amigos',
  'hermano', 'hermana', 'madre', 'papá', 'padre', 'padres', 'hijo', 'hija', 'primo', 'prima',
  'tío', 'tía', 'abuelo', 'abuela', 'novio', 'novia', 'esposo', 'esposa', 'marido', 'mujer',
  'hombre', 'chico', 'chica', 'niño', 'niña', 'compañero', 'compañera', 'jefe', 'vecino',
  'vecina', 'profesor', 'profesora', 'paciente', 'personaje', 'protagonista', 'narrador',
  'cantante', 'médico', 'psicólogo',
];

/** Works and reports: "the song goes…", "in dem Lied heißt es…". */
// prettier-ignore
export const MEDIA: readonly string[] = [
  'song', 'songs', 'lyric', 'lyrics', 'movie', 'film', 'show', 'series', 'book', 'novel', 'poem',
  'article', 'headline', 'episode', 'meme', 'quote', 'title', 'album', 'tiktok', 'tweet', 'lied',
  'songtext', 'buch', 'roman', 'gedicht', 'artikel', 'zeitung', 'schlagzeile', 'folge', 'serie',
  'zitat', 'spruch', 'chanson', 'paroles', 'livre', 'poème', 'journal', 'titre', 'citation',
  'canción', 'letra', 'película', 'peli', 'libro', 'novela', 'poema', 'artículo', 'titular',
  'noticia', 'episodio', 'frase',
];

/** Verbs that report someone's words: what follows them is that someone's, not the speaker's. */
// prettier-ignore
export const REPORTING_VERBS: readonly string[] = [
  'says', 'said', 'goes', 'sings', 'sang', 'writes', 'wrote', 'asked', 'asks', 'tweeted',
  'posted', 'texted', 'sagt', 'sagte', 'meint', 'meinte', 'singt', 'schreibt', 'schrieb', 'fragt',
  'fragte', 'heißt', 'dit', 'disait', 'chante', 'écrit', 'demande', 'demandait', 'dice', 'dijo',
  'decía', 'canta', 'escribe', 'escribió', 'pregunta', 'preguntó',
];

/**
 * Person words also said to the reader or as an interjection: "bro just wanna die", "man I want
 * to die". At the start of a sentence or before a comma they name nobody who acts (found by review).
 */
// prettier-ignore
export const VOCATIVES: readonly string[] = [
  'bro', 'dude', 'man', 'sis', 'girl', 'guys', 'mate', 'bestie', 'mann', 'alter', 'digga',
  'mec', 'frère', 'wesh', 'tío', 'tía', 'güey', 'wey', 'amigo', 'amiga', 'hermano', 'bruh',
];
