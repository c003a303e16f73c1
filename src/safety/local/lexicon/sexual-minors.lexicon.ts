import type { LexiconGroup } from './lexicon-types';

/**
 * Sexual content involving minors, read as a combination of parts within a few words of each
 * other: a minor (an age under 18, "child", "Kind", "enfant", "niño"…) with a sexual term, or with
 * a weaker term ("naked") when the message asks for content (write, roleplay, picture). Clinical
 * words only. Protective and educational contexts (sex education, puberty, grooming warning signs)
 * do not count, unless the message also asks for content.
 */
// prettier-ignore
export const SEXUAL_MINORS_LEXICON: readonly LexiconGroup[] = [
  {
    concept: 'minor',
    language: 'en',
    phrases: [
      '#1-17 [year|years|yr|yrs|yo|y o] [old|olds|]', '[aged|age] #1-17',
      '[i\'m|i am] #10-17',
      '[one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen] [year|years] [old|olds]',
      'child', 'children', 'kid', 'kids', 'minors', '[with|of|involving|about|between] [a|an] minor',
      'underage', 'under age', 'preteen',
      'pre-teen', 'tween', 'schoolgirl', 'schoolboy', 'little girl', 'little boy', 'toddler',
      'young teen', 'teen', 'teens', 'teenage*', 'loli', 'lolicon', 'shota', 'shotacon',
      // German
      '#1-17 [jahre|jährig*|jahre alt]',
      '[zwölfjährig*|dreizehnjährig*|vierzehnjährig*|fünfzehnjährig*|sechzehnjährig*|siebzehnjährig*]',
      // Not "kind" alone: English uses the word too.
      '[ein|einem|einen|das|dem|kleines|kleinen|mein|meinem|meinen] kind', 'kinder', 'minderjährig*',
      'schulmädchen', 'kleines mädchen', 'kleiner junge',
      // French
      '#1-17 ans', 'enfant', 'enfants', 'mineur', 'mineure', 'mineurs', 'gamin', 'gamine',
      'petite fille', 'petit garçon', 'fillette', 'collégienne', 'collégien',
      // Spanish
      '#1-17 años', 'niño', 'niña', 'niños', 'niñas', 'menor', 'menores', 'menor de edad', 'nena',
      'nene',
    ],
  },
  {
    concept: 'sexual',
    language: 'en',
    phrases: [
      'sex', 'sexy', 'sexual', 'sexually', 'sexualize*', 'sexualise*', 'erotic*', 'porn*', 'nsfw',
      'lewd', 'nudes', 'horny', 'aroused', 'orgasm*', 'intercourse', 'fetish*', 'make love',
      'hentai', 'dirty talk', 'talk dirty', 'sext*', 'onlyfans',
      'sexuell*', 'erotisch*', 'nacktbilder', 'nacktfotos',
      'sexe', 'sexuel*', 'érotique*', 'coquine',
      'sexo', 'erótic*', 'cachond*',
    ],
  },
  {
    concept: 'sexual_weak',
    language: 'en',
    phrases: [
      'naked', 'nude', 'undress*', 'striptease', 'lingerie', 'seduce*', 'seductive', 'explicit',
      'be my [girlfriend|boyfriend|lover|wife|husband]', 'date me', 'nackt', 'geil',
      'sei meine freundin', 'nue', 'nues', 'déshabill*', 'sois ma copine', 'desnud*', 'desvest*',
      'sé mi novia',
    ],
  },
  {
    concept: 'request',
    language: 'en',
    phrases: [
      'write', 'story', 'roleplay', 'role play', 'rp', 'pretend', 'describe', 'imagine', 'generate',
      'pic', 'pics', 'photo', 'photos', 'picture', 'pictures', 'image', 'images', 'video', 'videos',
      'send', 'show me', 'act as', 'schreib*', 'geschichte', 'rollenspiel', 'beschreib*', 'bild',
      'bilder', 'foto', 'fotos', 'écris', 'écrire', 'histoire', 'jeu de rôle', 'décris', 'escribe',
      'escribir', 'historia', 'rol', 'imagina', 'describe',
    ],
  },
  {
    concept: 'protective',
    language: 'en',
    phrases: [
      'puberty', 'protect', 'report', 'warning signs', 'signs', 'grooming', 'explain',
      'talk to [her|him|them] about', 'how do i talk', 'pubertät', 'aufklärung', 'schützen', 'melden',
      'puberté', 'protéger', 'signaler', 'pubertad', 'proteger', 'denunciar',
    ],
  },
  {
    concept: 'not_sexual',
    language: 'en',
    phrases: [
      'sex ed', 'sex education', 'sexual education', 'sexualkunde', 'sexualerziehung',
      'éducation sexuelle', 'educación sexual', 'hot chocolate', 'hot dog', 'body temperature',
      'sex of the baby', 'hot weather', 'so hot today',
    ],
  },
];
