import {
  crisisFigures,
  LANGUAGES,
  loadLabelledMessages,
  loadModerationMessages,
  SPLITS,
} from '../../../test/fixtures/safety/labelled-set';
import { LocalSafetyClassifier } from './local-safety-classifier';

describe('LocalSafetyClassifier', () => {
  const classifier = new LocalSafetyClassifier();
  const categoriesOf = (text: string) => classifier.classifySync(text).categories;
  const isSelfHarm = (text: string) => categoriesOf(text).includes('self_harm');

  describe('on the labelled set', () => {
    const messages = loadLabelledMessages();

    it('has the size and balance the figures are published for', () => {
      expect(messages.length).toBeGreaterThanOrEqual(400);
      for (const language of LANGUAGES) {
        const ofLanguage = messages.filter((message) => message.language === language);
        expect(ofLanguage.length).toBeGreaterThanOrEqual(100);
        const crisis = ofLanguage.filter((message) => message.label === 'crisis').length;
        expect(crisis * 2).toBe(ofLanguage.length);
      }
      for (const split of SPLITS) {
        expect(messages.some((message) => message.split === split)).toBe(true);
      }
      expect(new Set(messages.map((message) => message.text)).size).toBe(messages.length);
    });

    it.each(LANGUAGES)(
      '%s: recall ≥ 0.95 on crisis expressions, false positives ≤ 0.05 on hard negatives',
      (language) => {
        const { recall, falsePositiveRate, missed, falsePositives } = crisisFigures(
          messages,
          isSelfHarm,
        )[language];
        // A failure shows the figure with the messages behind it.
        expect(recall >= 0.95 ? 'recall ≥ 0.95' : { recall, missed }).toBe('recall ≥ 0.95');
        expect(
          falsePositiveRate <= 0.05 ? 'FPR ≤ 0.05' : { falsePositiveRate, falsePositives },
        ).toBe('FPR ≤ 0.05');
      },
    );
  });

  describe('on the obfuscated split (issue 28): text is read as a person reads it', () => {
    const obfuscated = loadLabelledMessages().filter((message) => message.split === 'obfuscated');

    it.each(LANGUAGES)(
      '%s: every hidden crisis expression found, no look-alike flagged',
      (language) => {
        const { crisis, negatives, missed, falsePositives } = crisisFigures(obfuscated, isSelfHarm)[
          language
        ];
        expect({ crisis, negatives }).toEqual({ crisis: 10, negatives: 10 });
        expect({ missed, falsePositives }).toEqual({ missed: [], falsePositives: [] });
      },
    );
  });

  describe('on the violence and sexual_minors set', () => {
    it.each(loadModerationMessages().map((message) => [message.kind, message.text, message]))(
      '%s: %s',
      (_kind, text, message) => {
        expect(categoriesOf(text)).toEqual(message.categories);
      },
    );
  });

  describe('reads the forms people hide words in', () => {
    it.each([
      ['leetspeak', 'i want to k1ll mys3lf'],
      // A pipe for an l, doubled, or for an i (review).
      ['pipes for ls', 'I want to ki|| myself'],
      ['a pipe for an i', 'I want to k|ll myself'],
      ['pipes for an i and an l', 'I want to k||l myself'],
      ['pipes for is', 'thinking about su|c|de again'],
      // Bars around or after words are punctuation, as Discord's spoilers are (review).
      ['spoiler bars', '||I want to die||'],
      ['bars after a word', 'suicide|| is the only way out'],
      ['a dollar for an s', '$uicide is the only way out'],
      ['digits inside a word', 'i just want to d13'],
      ['spaced letters', 'ive been thinking about k i l l i n g myself'],
      ['dotted letters', 'thinking about s.u.i.c.i.d.e again'],
      ['a spaced-out sentence', 'i w a n t t o d i e'],
      ['repeated letters', 'i just want to diiiiiie'],
      ['shouting', 'I WANT TO KILL MYSELF'],
      ['full-width letters', 'ｉ ｗａｎｔ ｔｏ ｄｉｅ'],
      ['zero-width characters', 'i want to kill my\u200bself'],
      ['curly apostrophes', 'i don’t want to live anymore'],
      ['no apostrophes', 'i dont want to live anymore'],
      ['chat spelling', 'wanna kms'],
      ['accents left off', 'je veux mourir, je suis fatiguee de vivre'],
      ['French without the apostrophe', 'j ai envie de mourir'],
      ['a Cyrillic і', 'i want to k\u0456ll myself'],
      ['a Greek ι', 'i want to d\u03b9e'],
      ['Cyrillic capitals', 'I W\u0410NT TO D\u0406\u0415'],
      ['a Cyrillic ѕ', 'thinking about \u0455uicide'],
      ['an Armenian ս', 'thinking about s\u057dicide'],
      ['a masked letter', 'i want to k*ll myself'],
      ['two masked letters', 'thinking about s**cide'],
      ['a masked doubled letter', 'i want to ki*l myself'],
      ['dotted letters with a closing dot', 'i want to k.i.l.l. myself'],
      ['a dotted word', 'i want to kill my.self'],
      ['zero-width joiners between letters', 'i want to k\u200di\u200dl\u200dl myself'],
      ['the Hangul filler', 'i want to kill my\u3164self'],
      ['a word joiner and a soft hyphen', 'i want to d\u2060i\u00ade'],
      ['"myself" as two words', 'I want to kill my self'],
      ['"myself" as two words, then more', 'I want to kill my self tonight'],
      ['"myself" as two words, hurting', 'I am going to hurt my self'],
      ['"myself" as two words, cutting', 'I want to cut my self'],
      ['"myself" as two words, with the verb in -ing', 'thinking of killing my  self'],
      // Found by the review of 2026-12-06.
      ['an underscore for a letter', 'i want to k_ll myself'],
      ['commas between letters', 'i want to k,i,l,l myself'],
      ['"2" for "to"', 'im going 2 end it tonight'],
      ['"sewer slide"', 'i think about sewer slide a lot'],
      ['"unalive" without an object', 'i just wanna unalive'],
      ['"unalive" without an object, then a time', 'i want to unalive tonight'],
      ['German without its umlauts', 'ich will mich toeten'],
      ['German without its umlauts, wishing', 'wuensche mir zu sterben'],
      ['a form of address first', 'bro just wanna die'],
      ['an interjection first', 'man i just want to die'],
      // Found by the review of the change.
      ['German, the speaker after the verb', 'Seit dem Tod meiner Mutter will ich sterben'],
      [
        'German, the speaker after the verb, wishing',
        'Wegen meinem Chef möchte ich einfach tot sein',
      ],
      ['a denial before a bracket', "i'm not okay (want to die)"],
    ])('%s: "%s" is self_harm', (_form, text) => {
      expect(categoriesOf(text)).toEqual(['self_harm']);
    });

    it.each([
      'that really hurt my self-esteem',
      'that really hurt my self esteem',
      'it hurt my self confidence when they laughed',
      'I cut my self-care routine down to ten minutes',
      'I want to kill my. Self-doubt is the worst',
    ])('does not read "my self" as "myself" where "self" begins a compound: "%s"', (text) => {
      expect(isSelfHarm(text)).toBe(false);
    });

    it.each([
      ['a count after "want"', 'I have 2 dogs and want 2 more'],
      ['"2" for "to" in an errand', 'i want 2 go home'],
      ['a slide at a water park', 'the sewer slide at the water park was fun'],
      ["someone else's character", 'my character wants to unalive'],
      ['an identifier', 'kill_switch enabled in config'],
      ['the idiom, written with "2"', "i'm ready 2 die on this hill"],
      ['a person word that is the subject', 'my bro wants to die'],
      ['a person word before a comma', 'My girl, who is 15, wanted to die'],
      ['a person word before a comma, German', 'Mein Mann, der Krebs hat, will sterben'],
      ['a person word before a comma, French', 'Mon frère, qui est en prison, a envie de mourir'],
      ['German "will" of someone else', 'meine freundin hat gesagt sie will sterben'],
      ['German "will" of someone else, alone', 'er will sterben'],
      ['someone else tired of life', 'meine mutter ist lebensmüde'],
      ['a pupil, her umlaut typed as two letters', 'meine schuelerin will sterben'],
    ])('leaves what the new readings must not take clean: %s, "%s"', (_what, text) => {
      expect(isSelfHarm(text)).toBe(false);
    });
  });

  describe('draws the lines docs/safety.md describes', () => {
    it.each([
      ['figurative', 'this commute is killing me'],
      ['figurative', 'I could die laughing'],
      ['figurative', "I'm dying to see that film"],
      ['figurative, German', 'das bringt mich um 😂'],
      ['figurative, French', 'je meurs de faim'],
      ['figurative, Spanish', 'me muero de risa'],
      ['an idiom after the phrase', 'i want to die of embarrassment'],
      ['negation', 'I would never hurt myself'],
      ['negation', "I'm not suicidal"],
      ['a negation three words back', 'no estoy pensando en suicidarme'],
      ['a trailing French negation', 'je me suiciderai jamais'],
      ['news', 'the article about the suicide rate'],
      ['third person', 'my friend said she wanted to die, how can I help her?'],
      ['a reporting verb', 'the character says i want to die'],
      ['a quotation from a song', 'the song goes "i wanna die" and it is stuck in my head'],
      ['someone else asking', 'my therapist asked if i ever had suicidal thoughts'],
      ['fiction', 'in romeo and juliet why do they both kill themselves'],
      ['medical', 'can antidepressants cause suicidal thoughts in teenagers?'],
      ['an accident', 'i cut myself chopping onions'],
      ['an everyday place', "i don't want to live in this town anymore"],
      ['a farewell for now', 'this is goodbye for now, see you tomorrow!'],
    ])('%s: "%s" is not self_harm', (_why, text) => {
      expect(isSelfHarm(text)).toBe(false);
    });

    it.each([
      [
        'an idiom does not cancel a later statement',
        'i could die laughing. but honestly i want to die',
      ],
      ['a quotation the speaker introduces', 'i keep thinking "i want to die" over and over'],
      ['a laugh does not cancel ideation', 'i want to die lol'],
      ['a negation in another clause', "i'm not okay but i want to die"],
      ['means at hand with distress', "i can't take it anymore. the pills are right here"],
    ])('%s: "%s" is self_harm', (_why, text) => {
      expect(isSelfHarm(text)).toBe(true);
    });

    // A hostile review of 2026-12-05 wrote how people at risk write in chat: each of these had
    // been read as nothing (a context rule, an idiom or a phrase missing), or as self_harm.
    it.each([
      ['what was said ends at "and"', "she said we're done and i want to kill myself"],
      ['… and at "so"', "my mom said i'm useless so i'm going to kill myself"],
      [
        '… and where the speaker begins',
        "he said he doesn't love me anymore, i'm going to kill myself",
      ],
      ['… and at "but"', "you said you'd always be here but i want to die"],
      ['a negation in a clause before the speaker’s', "i'm not ok i want to die"],
      ['… without punctuation', 'im not okay i want to die'],
      ['a method named after an accident’s words', 'i cut myself with a razor again'],
      ['not the idiom "live in"', "i don't want to live in this world anymore"],
      ['not the idiom "live with"', "i can't live with myself anymore"],
      ['not the idiom "end it with" someone', 'i want to end it with pills tonight'],
      ['a word inside "want to die"', 'i want to just die'],
      ['… an oath inside', 'i want to fucking die'],
      ['a method verb', 'i want to shoot myself'],
      ['an overdose', 'i took an overdose'],
      ['an overdose ahead', "i'm going to overdose"],
      ['feeling like dying', 'i feel like dying'],
      ['not wanting to be alive', 'i wish i wasnt alive'],
      ['not wanting to exist', 'i want to stop existing'],
      ['others better off', 'everyone will be happier when im gone'],
      ['asking to die', 'please let me die'],
      ['a burden', "i'm just a burden"],
      ['an overdose taken', 'i took like 30 pills'],
      ['a method at hand, for the speaker', "i have a gun and i'm going to use it on myself"],
      ['means at hand with distress', 'i have the pills ready and i cant do this anymore'],
      ['not wanting to go on', "i don't want to keep going"],
      ['chat shorthand', 'i want to ctb'],
      ['a typo', 'i want die'],
      ['German, "nehm"', 'ich nehm mir das leben'],
      ['German, an umlaut typed as two letters', 'ich moechte sterben'],
      ['German, the end of a life', 'ich setze meinem leben ein ende'],
      ['French, cut again', 'je me suis encore coupée'],
      ['French, slang', 'jvais me foutre en lair'],
      ['Spanish, cut again', 'me corté otra vez'],
      ['Spanish, a bridge', 'me voy a tirar del puente'],
      ['Spanish, not existing', 'quiero dejar de existir'],
      ['Spanish, pills taken', 'me tomé todas las pastillas'],
      ['a hash for a letter', 'i want to k#ll myself'],
      ['a caret for a letter', 'k^ll myself'],
      ['a pause inside the phrase', 'i want to... die'],
      ['small capitals, a Cyrillic f', 'i want to ᴋɪʟʟ ᴍʏsᴇʟғ'],
      ['not noticed, negation and all', "they won't even notice when i'm gone"],
      ['self-harm shorthand', 'i sh again'],
      ['… written as one character', 'i want to…die'],
    ])('%s: "%s" is self_harm (review)', (_why, text) => {
      expect(isSelfHarm(text)).toBe(true);
    });

    it.each([
      ['still a denial', 'not that i want to die'],
      ['an idiom', 'i shot myself in the foot with that email'],
      ['an idiom', 'i need to cut myself some slack'],
      ['a goodnight', 'this is my last message for today, goodnight'],
      ['a baby asleep', "i hope i don't wake up the baby"],
      ['hard work', "i'm killing myself trying to finish this thesis"],
      ['an accident still', 'i burned myself with the iron'],
      ['a hair colour', 'i want to die my hair blue'],
      ['tired', 'i could sleep forever'],
      ['a trip still', "i don't want to go on the trip"],
      ['proud', "i'm proud of myself"],
      ['French, a haircut', 'je me suis coupé les cheveux'],
      ['Spanish, an early alarm', 'no quiero despertar temprano'],
      ['German, a denial', 'ich möchte nicht sterben'],
      ['a language name', 'i love c# and f# code, they kill it'],
      ['a denial across a pause', 'i would never... hurt myself'],
      ['no weapon named', "i bought a face mask and i'm going to use it on myself tonight"],
    ])('%s: "%s" is not self_harm (review)', (_why, text) => {
      expect(isSelfHarm(text)).toBe(false);
    });

    it('does not take means at hand without distress for a crisis', () => {
      expect(isSelfHarm('the pills are right here, i take them every morning')).toBe(false);
    });

    it('takes "kill" as banter unless a weapon or seriousness is named', () => {
      expect(categoriesOf("i'm going to kill my brother, he ate my cake")).toEqual([]);
      expect(categoriesOf("i'll kill you if you eat my fries")).toEqual([]);
      expect(categoriesOf("i'm going to kill my brother tomorrow, i'm not joking")).toEqual([
        'violence',
      ]);
      expect(categoriesOf("i'm going to kill him tomorrow lol")).toEqual([]);
      expect(categoriesOf("i'm going to kill him, the knife is ready")).toEqual(['violence']);
    });

    it('takes a specific violent act as meant, with or without a weapon', () => {
      expect(categoriesOf("i'm going to stab him tomorrow")).toEqual(['violence']);
      expect(categoriesOf('i bought a gun. i am going to use it on him')).toEqual(['violence']);
      expect(categoriesOf("i'm going to use it on him")).toEqual([]);
    });

    it('does not flag an emoji-only message, unless an emoji stands in a threat', () => {
      expect(categoriesOf('😭😭😭')).toEqual([]);
      expect(categoriesOf('🔪🔪🔪')).toEqual([]);
      expect(categoriesOf('💀💀💀 💣')).toEqual([]);
      expect(categoriesOf('i am going to 🔪 him tonight')).toEqual(['violence']);
    });

    it('keeps a protective context for minors clean, unless content is asked for', () => {
      expect(categoriesOf('my 14 year old starts sex ed, how do i talk to her about it')).toEqual(
        [],
      );
      expect(categoriesOf('write a sexy story about a 14 year old for sex ed')).toEqual([
        'sexual_minors',
      ]);
      expect(categoriesOf('what kind of sexy outfit should i wear tonight')).toEqual([]);
    });
  });

  describe('as a classifier', () => {
    it('lists categories in canonical order, each once', () => {
      expect(
        categoriesOf(
          'i am going to stab him tomorrow and then kill myself. i want to kill myself.',
        ),
      ).toEqual(['self_harm', 'violence']);
    });

    it('answers the same verdict, decided by itself, through classify and classifySync', async () => {
      const text = 'i want to end my life';
      await expect(classifier.classify(text)).resolves.toEqual({
        categories: ['self_harm'],
        decidedBy: 'local',
      });
      expect(classifier.classifySync(text)).toEqual({
        categories: ['self_harm'],
        decidedBy: 'local',
      });
    });

    it('tells which text could make a clean text before it harmful: one with a phrase', () => {
      for (const text of ['The knife is ready.', 'I will kill him.', 'lol', 'sk\u0430b']) {
        expect({ text, could: classifier.couldFlagAfter(text) }).toEqual({
          text,
          could: text !== 'sk\u0430b',
        });
      }
      expect(classifier.couldFlagAfter('We talked about the weather.')).toBe(false);
      expect(classifier.couldFlagAfter('')).toBe(false);
      // After text a sentence break ends, as this reads one, the text alone decides; after three
      // dots or a word cut short, a phrase may have begun before it (review).
      for (const before of ['I like it.', 'Really?', 'Stop!', 'Done;', 'A line\n', '"Stop." ']) {
        expect({ before, could: classifier.couldFlagAfter(' bomb.', before) }).toEqual({
          before,
          could: false,
        });
      }
      for (const before of [
        'how to make a...',
        'how to make a…',
        'a pipe ',
        'a pipe bo',
        'k.i.l.l.',
      ]) {
        expect({ before, could: classifier.couldFlagAfter(' bomb.', before) }).toEqual({
          before,
          could: true,
        });
      }
      // Whatever holds no phrase adds nothing: on every labelled message.
      for (const { text } of [...loadLabelledMessages(), ...loadModerationMessages()]) {
        if (!classifier.couldFlagAfter(text)) expect(categoriesOf(text)).toEqual([]);
      }
    });

    it('is deterministic: a second instance agrees on every labelled message', () => {
      const other = new LocalSafetyClassifier();
      for (const { text } of loadLabelledMessages()) {
        expect(other.classifySync(text)).toEqual(classifier.classifySync(text));
      }
    });

    it('finds a statement at the end of a 10,000-character message', () => {
      const filler = 'we talked about the weather, the garden and the football. '.repeat(200);
      const long = `${filler.slice(0, 10_000 - 30)} i want to kill myself`;
      expect(long.length).toBeLessThanOrEqual(10_000);
      expect(categoriesOf(long)).toEqual(['self_harm']);
      expect(categoriesOf(filler.slice(0, 10_000))).toEqual([]);
      expect(categoriesOf('k i l l '.repeat(1250))).toEqual([]);
      expect(categoriesOf('a'.repeat(10_000))).toEqual([]);
    });

    it('stays right in a long message full of phrases that cancel or deny each other', () => {
      const cancelled = "i could die laughing, i don't want to die, kill myself laughing ".repeat(
        160,
      );
      expect(categoriesOf(cancelled)).toEqual([]);
      expect(categoriesOf(`${cancelled} i want to die`)).toEqual(['self_harm']);
      const markers = 'my kid and the teen write a story about sex ed and puberty. '.repeat(160);
      expect(categoriesOf(markers)).toEqual([]);
    });

    it.each([
      ['Japanese', '今日はいい天気ですね。散歩に行きたい。'],
      ['Chinese', '我今天很开心，想去公园散步。'],
      ['Arabic', 'مرحبا، كيف حالك اليوم؟'],
      ['Hebrew', 'שלום, מה שלומך?'],
      ['Cyrillic', 'Привет, как дела? Я хочу гулять.'],
      ['Greek', 'Γεια σου, τι κάνεις;'],
      ['Hindi', 'नमस्ते, आप कैसे हैं?'],
      ['Korean', '안녕하세요, 오늘 기분이 좋아요'],
      ['Thai', 'สวัสดีครับ วันนี้อากาศดี'],
      ['emoji sequences', '👩‍👩‍👧‍👦🏳️‍🌈👍🏽'],
      ['a lone surrogate', 'hello \ud800 there \udfff'],
      ['control characters', 'line\u0001one\u0007\u001b[31mred\u001b[0m\ttab\r\n'],
      ['bidirectional marks', '\u202eeid ot tnaw i\u202c'],
      ['combining marks only', '\u0301\u0302\u0303'],
      ['the empty string', ''],
      ['whitespace', ' \n\t '],
      ['unbalanced quotation marks', '"“„« she said \' \' "'],
    ])('handles %s without flagging it', (_what, text) => {
      expect(categoriesOf(text)).toEqual([]);
    });
  });
});
