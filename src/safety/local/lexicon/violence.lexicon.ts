import type { LexiconGroup } from './lexicon-types';

/**
 * Threats or intent to seriously harm someone, and requests for instructions. A threat needs a
 * person as target ("stab him", "shoot up my school"); "kill the process", "kill time" and "kill
 * the final boss" have none. "Kill" is the verb of hyperbole, so it is weighed apart (see
 * `violence_kill` in lexicon-types.ts).
 */
// prettier-ignore
export const VIOLENCE_SETS: Readonly<Record<string, string>> = {
  EN_INTENT: 'going to|gonna|will|i\'ll|want to|about to|planning to|plan to|am going to|i\'m going to|i\'m gonna|gonna go|finally going to',
  EN_PERSON: 'boss|wife|husband|ex|girlfriend|boyfriend|mom|mum|mother|dad|father|brother|sister|teacher|neighbor|neighbour|coworker|colleague|classmate|roommate|stepdad|stepmom|family|kids|son|daughter|friend|bully|manager',
  EN_TARGET: 'him|her|them|everyone|everybody|someone|somebody|people|my @EN_PERSON|his @EN_PERSON|that @EN_PERSON|the @EN_PERSON|this @EN_PERSON|all of them',
  DE_PERSON: 'nachbarn|nachbar|chef|chefin|lehrer|lehrerin|mann|frau|ex|freund|freundin|vater|mutter|bruder|schwester|kollegen|kollegin|mitschüler',
  DE_TARGET: 'ihn|sie|jemanden|alle|meinen @DE_PERSON|meine @DE_PERSON|den @DE_PERSON|die @DE_PERSON|diesen @DE_PERSON|diese @DE_PERSON',
  FR_PERSON: 'patron|patronne|femme|mari|ex|copain|copine|père|mère|frère|sœur|prof|voisin|voisine|collègue|collègues|camarades|élèves',
  ES_PERSON: 'jefe|jefa|esposa|esposo|marido|mujer|ex|novio|novia|padre|madre|hermano|hermana|profesor|profesora|vecino|vecina|compañero|compañera|compañeros',
};

// prettier-ignore
export const VIOLENCE_LEXICON: readonly LexiconGroup[] = [
  {
    concept: 'violence',
    language: 'en',
    person: 'subject',
    phrases: [
      '[@EN_INTENT] [stab|shoot|murder|strangle|poison|behead|knife|choke|torture|run over|slit the throat of] @EN_TARGET',
      '[@EN_INTENT] [beat|bash] @EN_TARGET [to death|unconscious]', 'beat ~3 to death',
      'shoot up [the|my|a|this|that|our] [school|mall|church|office|class|concert|mosque|synagogue|workplace]',
    ],
  },
  {
    concept: 'violence',
    language: 'en',
    person: 'subject',
    requires: 'weapon',
    phrases: ['[@EN_INTENT] use [it|this|that|them] on @EN_TARGET'],
  },
  {
    concept: 'violence',
    language: 'en',
    phrases: [
      'how ~3 [make|build|assemble|making|building] ~2 [pipe bomb|bomb|molotov|molotov cocktail|explosive|explosives|ied|nail bomb|car bomb]',
      '[how to|how do i|how can i|best way to|way to|easiest way to] [poison|kill|murder|strangle|stab|hurt] [someone|somebody|a person|people|my @EN_PERSON|him|her]',
      '[kill|murder|poison|hurt] ~3 [without getting caught|and not get caught|without anyone knowing|without anyone noticing|without leaving a trace]',
      'untraceable poison',
    ],
  },
  {
    concept: 'violence_kill',
    language: 'en',
    person: 'subject',
    phrases: ['[@EN_INTENT] kill @EN_TARGET', '[@EN_INTENT] murder @EN_TARGET'],
  },
  {
    concept: 'violence_kill',
    language: 'en',
    person: 'subject',
    phrases: ['[@EN_INTENT] [kill|murder|stab|shoot] you'],
  },
  {
    concept: 'violence',
    language: 'de',
    person: 'subject',
    phrases: [
      '[werde|will|geh|gehe|ich|wollte] ~1 @DE_TARGET ~2 [abstechen|erstechen|erschießen|abknallen|erwürgen|vergiften|niederstechen|totschlagen|totprügeln]',
      '[wie] ~3 [bombe|rohrbombe|sprengsatz|molotowcocktail] ~2 [bauen|baue|basteln|herstellen]',
      '[baue|bauen|bastle|basteln] ~2 [bombe|rohrbombe|sprengsatz|molotowcocktail]',
      'wie ~3 [vergifte|vergiften] ~2 [jemanden|meinen|meine|ihn|sie]',
    ],
  },
  {
    concept: 'violence_kill',
    language: 'de',
    person: 'subject',
    phrases: ['[bring|bringe] @DE_TARGET ~2 um', '[werde|will|geh|gehe] ~1 @DE_TARGET ~2 [umbringen|töten|kaltmachen]'],
  },
  {
    concept: 'violence_kill',
    language: 'de',
    person: 'subject',
    phrases: ['[bring|bringe] dich ~2 um', '[werde|will] dich ~2 [umbringen|töten|abstechen]'],
  },
  {
    concept: 'violence',
    language: 'fr',
    person: 'subject',
    phrases: [
      '[vais|veux|voudrais] [le|la|les] [poignarder|égorger|empoisonner|flinguer|planter|étrangler|buter]',
      '[vais|veux] [poignarder|égorger|empoisonner|flinguer|étrangler] [mon|ma|mes|ce|cette] [@FR_PERSON]',
      '[vais|veux] tirer sur [mes|les|des|mon|ma|tout le monde] ~1 [@FR_PERSON|gens|monde]',
      'comment ~2 [fabriquer|faire|construire] ~2 [bombe|cocktail molotov|explosif]',
    ],
  },
  {
    concept: 'violence_kill',
    language: 'fr',
    person: 'subject',
    phrases: ['[vais|veux|voudrais] [le|la|les] tuer', '[vais|veux] tuer [mon|ma|mes|ce|cette] [@FR_PERSON]'],
  },
  {
    concept: 'violence_kill',
    language: 'fr',
    person: 'subject',
    phrases: ['[vais|veux] te [tuer|buter|poignarder]'],
  },
  {
    concept: 'violence',
    language: 'es',
    phrases: [
      'voy a [apuñalarlo|apuñalarla|apuñalarlos|dispararle|dispararles|envenenarlo|envenenarla|acuchillarlo|acuchillarla|degollarlo]',
      '[lo|la|los] voy a [apuñalar|envenenar|acuchillar|degollar]',
      '[cómo|como] ~2 [hacer|fabricar|armar] ~2 [bomba|explosivo|cóctel molotov|coctel molotov]',
    ],
  },
  {
    concept: 'violence_kill',
    language: 'es',
    phrases: ['voy a [matarlo|matarla|matarlos]', '[lo|la|los] voy a matar', 'voy a matar a [mi|mis|ese|esa|el|la|todos] ~1 [@ES_PERSON|]'],
  },
  {
    concept: 'violence_kill',
    language: 'es',
    phrases: ['[voy a matarte|te voy a matar|te mato]'],
  },
  {
    concept: 'not_violence',
    language: 'en',
    scope: 'sentence',
    phrases: [
      '[final|end|last] boss', 'boss fight', '[in|this|the] game', 'level', 'elden ring', 'minecraft',
      'fortnite', 'skyrim', 'dark souls', 'zelda', 'gta', 'call of duty', 'valorant', 'bath bomb',
      'endboss', 'im spiel', 'dans le jeu', 'boss final', 'jefe final', 'en el juego',
      'bombe de bain', 'bomba de baño',
    ],
  },
  {
    concept: 'weapon',
    language: 'en',
    phrases: [
      'knife', 'gun', 'rifle', 'pistol', 'shotgun', 'blade', 'machete', 'axe', 'messer', 'pistole',
      'waffe', 'gewehr', 'couteau', 'flingue', 'arme', 'pistolet', 'fusil', 'cuchillo', 'navaja',
      'pistola', 'arma', 'escopeta',
    ],
  },
  {
    concept: 'intent',
    language: 'en',
    phrases: [
      'not joking', 'not kidding', '[i\'m|i am] serious', 'no joke', 'for real', 'tomorrow', 'tonight',
      'when [he|she|they] [gets|get] home', 'i know where [he|she|they] [lives|live]',
      'already [planned|bought]', 'kein witz', 'kein scherz', 'ernsthaft', 'ich meine es ernst',
      'morgen', 'heute nacht', 'heute abend', 'je suis sérieux', 'je suis sérieuse', 'sans rire',
      'demain', 'ce soir', 'en serio', 'no es broma', 'mañana', 'esta noche',
    ],
  },
  {
    concept: 'laughter',
    language: 'en',
    phrases: [
      'lol', 'lmao', 'lmfao', 'rofl', 'haha*', 'hehe*', 'jk', 'just kidding', 'mdr', 'ptdr', 'jaja*',
      'jeje*', 'xd',
    ],
  },
];
