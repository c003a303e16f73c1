/**
 * Everyday companion-chat text for the memory benches, generated deterministically from a seed:
 * no external data. A user's message and a personality's reply are built from sentence templates
 * with slots (people, places, times, activities, feelings, food, topics…), so the text has the
 * shape of chat (short first-person sentences, questions, a few hundred distinct content words
 * used with very uneven frequencies) and full-text search sees realistic posting lists: common
 * words ("work", "today", "feel", "week", "friend") in a large share of the messages, rare ones in
 * few. The lengths are those of bench/scenarios/pmf-import.ts: a user's message 20..400
 * characters (most short), a reply 80..1,200.
 */

/** A deterministic generator (mulberry32), as in pmf-import.ts. */
export function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type Random = () => number;

export const pick = <T>(next: Random, list: readonly T[]): T =>
  list[Math.floor(next() * list.length)];

const list = (text: string) => text.split('|');

// prettier-ignore
const SLOTS: Record<string, string[]> = {
  person: list('my sister|my brother|my mum|my dad|my boss|a friend of mine|my neighbour|my cousin|my flatmate|a colleague|my partner|my grandad|my nan|my aunt|my uncle|my son|my daughter|the kids|my best friend|an old school friend|my manager|my therapist|my landlord|the new guy at work|my in-laws|my sister-in-law|my godson|my team lead|the woman next door|my gym buddy'),
  place: list('the supermarket|the gym|the park|the office|the station|the library|the dentist|the cinema|the beach|the market|the pub|the café on the corner|my parents\' place|the post office|the hospital|the garden centre|the bakery|the pharmacy|the hairdresser|the swimming pool|IKEA|the farmers market|the bank|the vet|the doctor|the shopping centre|the allotment|the bookshop|the climbing wall|the laundrette|the bus stop|the airport|the museum|the school gates|the corner shop'),
  time: list('This morning|Yesterday|Last night|On Monday|At lunch|After work|This weekend|Earlier today|Last week|Tonight|On Saturday|On Sunday|This afternoon|Before work|Over the weekend|The other day|On Friday|Just now|A couple of days ago|Last month'),
  when: list('this weekend|tomorrow|next week|tonight|on Saturday|after work|before the holidays|this month|in the morning|on my day off|next month|soon|after Christmas|in the spring|this summer|at some point'),
  activity: list('go for a run|cook something new|clean the flat|read a book|watch a film|call my mum|do the laundry|go swimming|learn to knit|play some guitar|fix my bike|finish my report|sort out my taxes|paint the bedroom|walk the dog|bake a cake|visit my grandparents|start journaling|go to bed earlier|drink more water|take a day off|try yoga|repot the plants|tidy the garage|book a holiday|catch up on emails|meal prep for the week|go to the gym|write some letters|see a doctor|practise the piano|learn some Spanish|go hiking|clear out the wardrobe|get a haircut|ask for a raise|update my CV|declutter the kitchen|plan a picnic|take the car in for a service'),
  ing: list('cleaning|working|reading|scrolling on my phone|cooking|running errands|gardening|watching TV|sleeping|studying|driving around|shopping|baking|tidying up|playing video games|doing laundry|walking|answering emails|sorting paperwork|waiting around|painting|cycling|doing nothing|writing|listening to podcasts'),
  feeling: list('tired|happy|stressed|anxious|excited|bored|relaxed|grumpy|proud|overwhelmed|calm|nervous|annoyed|hopeful|lonely|content|restless|motivated|drained|a bit low|cheerful|frustrated|worried|grateful|confused|sleepy|energetic|hopeless about it|fine|okay'),
  topic: list('the weather|the rent|my new phone|the football|a podcast I found|the news|the traffic|that new series|my diet|my sleep|the holidays|the heating bill|the meeting tomorrow|my plants|the budget|the election|a recipe I saw|my finances|the neighbours|my career|the flat|my health|the wedding|the kids\' school|the car|my birthday plans|the garden|the trip|the noise upstairs|my back|the office move|climate change|a book I\'m reading|the price of everything|my phone bill|a job offer|Christmas|the dog|my exams|the deadline'),
  food: list('pasta|a curry|soup|pizza|a salad|tacos|toast|noodles|a sandwich|pancakes|stew|sushi|porridge|a burger|fish and chips|a stir fry|leftovers|a roast|chilli|eggs on toast|a pie|ramen|a wrap|cereal|risotto|dumplings|a kebab|lasagne|a jacket potato|falafel'),
  quality: list('amazing|okay|a bit bland|really good|too salty|not great|lovely|disappointing|surprisingly good|perfect|alright|delicious|awful|fine|better than expected'),
  event: list('long|weird|quiet|busy|lovely|rough|boring|strange|great|chaotic|slow|productive|exhausting|nice|stressful|funny|calm|hectic|pretty normal|frustrating'),
  period: list('day|week|morning|evening|weekend|afternoon|month|night|shift'),
  weather: list('freezing|grey|rainy|sunny|windy|humid|foggy|warm|miserable|gorgeous|cold|stormy|muggy|bright|chilly'),
  show: list('a documentary about octopuses|an old Bond film|that baking show|a horror film|the new crime drama|a romcom|the match|a nature programme|some stand-up comedy|a cooking show|a quiz show|the news|a true crime series|an anime|a musical|a sci-fi film|the highlights|a reality show'),
  item: list('new shoes|a present for my mum|groceries|a new charger|stamps|a birthday card|paint|a new kettle|batteries|a winter coat|dog food|light bulbs|a lamp|a notebook|plant pots|a phone case|bin bags|train tickets|a mattress|a rug'),
  music: list('old jazz records|a lot of eighties pop|this one album on repeat|classical music while I work|some new indie bands|film soundtracks|podcasts instead of music|my teenage playlist|folk music|hip hop|the radio|lo-fi beats|country music|a lot of Taylor Swift'),
  duration: list('an hour|forty minutes|ages|twenty minutes|almost two hours|half an hour|ten minutes|the whole morning|three hours'),
  plan: list('a surprise party|a weekend away|my week|a dinner for friends|the move|a budget|a garden makeover|a road trip|a reading list|a study schedule|a birthday picnic|Christmas dinner'),
  body: list('back|knee|head|neck|shoulder|foot|stomach|wrist|eyes|throat'),
  thing: list('that café we liked|the film with the boat|the song from the advert|that app for budgeting|the street where the market is|that podcast host|the book my friend lent me|that plant with the purple leaves|the game we used to play|the restaurant by the river|the actor in that series|the recipe with lentils'),
  reply: list('lovely|hard|exhausting|exciting|frustrating|really meaningful|like a lot to carry|like a good change|tough|wonderful|stressful|like progress|peaceful|like quite a day'),
};

// prettier-ignore
const USER_TEMPLATES = list(
  '{time} I went to {place} and it was {event}.|' +
  'I\'m feeling {feeling} today.|' +
  'I\'ve been feeling {feeling} all {period}.|' +
  '{Person} called me about {topic}.|' +
  'Do you think I should {activity} {when}?|' +
  'I finally managed to {activity}!|' +
  'I had {food} for dinner, it was {quality}.|' +
  'Work has been {event} lately, too many meetings.|' +
  'I can\'t stop thinking about {topic}.|' +
  '{Person} and I had an argument about {topic}.|' +
  'I want to {activity} more often.|' +
  'The weather here is {weather} again.|' +
  'I watched {show} last night.|' +
  'Honestly I just need some sleep.|' +
  'Not much happening, just {ing}.|' +
  'I\'m trying to {activity} but I keep putting it off.|' +
  'I keep forgetting to {activity}.|' +
  'Remember when I said I wanted to {activity}? I actually did it.|' +
  'What do you think about {topic}?|' +
  '{Person} says I should {activity}.|' +
  'I spent the whole {period} {ing}.|' +
  'It took me {duration} to get to {place} today.|' +
  'I\'ve been listening to {music} lately.|' +
  'The train was late again, I waited {duration}.|' +
  'Can you help me plan {plan}?|' +
  'I\'m not sure what to do about {topic}.|' +
  'I bumped into {person} at {place}.|' +
  'My {body} hurts from all the {ing}.|' +
  'Tell me something nice.|' +
  'I love {ing} on a {weather} day.|' +
  'I don\'t really like {food}, to be honest.|' +
  'How do you deal with feeling {feeling}?|' +
  'Maybe I\'ll {activity} {when}.|' +
  'We\'re thinking of moving somewhere bigger.|' +
  'I need to buy {item} before {when}.|' +
  'I can never remember the name of {thing}.|' +
  '{Person} is coming over {when}.|' +
  'It was a {event} {period} at work.|' +
  'I worked late again and I\'m {feeling}.|' +
  'My first thought this morning was about {topic}.|' +
  'Is it weird that I enjoy {ing}?|' +
  '{Person} got a new job and I\'m happy for them.|' +
  'I think I\'m getting a cold.|' +
  'I went for a long walk after {food} at lunch.|' +
  'I have so much to do {when}.|' +
  'Sorry, I was busy {ing} all day.|' +
  'We had {food} at {place}, it was {quality}.|' +
  'I\'m so {feeling}, I barely slept.|' +
  'Good morning! It\'s {weather} out.|' +
  'I\'m back from {place}.|' +
  'Do you ever get {feeling} for no reason?|' +
  '{Person} told me a funny story about {topic}.|' +
  'I should really {activity}.|' +
  'Today felt {event}.|' +
  'I\'m making {food} tonight.|' +
  'What should I have for dinner?|' +
  'My coffee went cold while I was {ing}.|' +
  'The best part of my {period} was {ing}.|' +
  'I had a dream about {topic}, so strange.|' +
  'I\'m a bit worried about {topic}.|' +
  'Can I tell you something? I\'m {feeling} about {topic}.|' +
  'My phone died and I missed a call from {person}.|' +
  'I tried to {activity} but it was {event}.|' +
  'It\'s been a {event} {period}, I need a break.|' +
  'Do you remember what we talked about last time?|' +
  '{Person} wants to {activity} with me {when}.|' +
  'I saw an old friend at {place} and we talked for {duration}.|' +
  'The cat from next door keeps sitting in our garden.|' +
  'I played cards with {person} {when2}.|' +
  'Our car made a weird noise on the way to {place}.|' +
  'I signed up to {activity}, wish me luck.|' +
  'How was your day?|' +
  'Thanks for listening, it helps.|' +
  'Ugh, {topic} again.',
);

// prettier-ignore
const REPLY_TEMPLATES = list(
  'That sounds {reply}.|' +
  'How did that make you feel?|' +
  'It\'s completely normal to feel {feeling} sometimes.|' +
  'What would make {when} a bit easier for you?|' +
  'Tell me more about {topic}.|' +
  'That\'s a good idea, it can really help to {activity}.|' +
  'Have you talked to {person} about it?|' +
  'Small steps still count.|' +
  'It sounds like you\'ve had a {event} {period}.|' +
  'What\'s one thing you\'re looking forward to?|' +
  'I\'m glad you told me.|' +
  'That must have been {reply}.|' +
  'Be gentle with yourself today.|' +
  'What do you think is behind feeling {feeling}?|' +
  'Maybe you could {activity} {when} and see how it feels.|' +
  'I hear you.|' +
  'It makes sense that {topic} is on your mind.|' +
  '{food} sounds like a good choice for a {weather} evening.|' +
  'How are you sleeping at the moment?|' +
  'You\'ve handled a lot this {period}.|' +
  'Is there anything you\'d like to do differently next time?|' +
  'I\'m proud of you for trying.|' +
  'What helped the last time you felt like this?|' +
  'That\'s a lovely thing to notice.|' +
  'Would it help to make a small plan for {when}?|' +
  'It\'s okay not to have it all figured out.|' +
  'What did {person} say?|' +
  'It sounds like {ing} gives you some space to breathe.|' +
  'Take a moment for yourself if you can.|' +
  'I\'d love to hear how it goes.|' +
  'That\'s really thoughtful of you.|' +
  'Sometimes a {event} {period} just needs a quiet evening after it.|' +
  'What would you tell a friend in the same situation?|' +
  'Let\'s think it through together.|' +
  'You don\'t have to decide anything today.',
);

/** A template with its slots filled; in a reply, the user's "my" becomes "your". */
function fill(next: Random, template: string, reply: boolean): string {
  return template.replace(/\{(\w+)\}/g, (_, slot: string) => {
    if (slot === 'Person') {
      const person = pick(next, SLOTS.person);
      return person[0].toUpperCase() + person.slice(1);
    }
    const value = pick(next, SLOTS[slot === 'when2' ? 'when' : slot]);
    if (value === undefined) throw new Error(`no slot ${slot}`);
    return reply ? value.replace(/\bmy\b/g, 'your').replace(/\bI'm\b/g, "you're") : value;
  });
}

/**
 * Templates are chosen with a skewed distribution (the first of the list much more often than the
 * last), as people repeat themselves: index `next() ** 1.6` of the list.
 */
function sentence(next: Random, templates: readonly string[]): string {
  const text = fill(
    next,
    templates[Math.floor(next() ** 1.6 * templates.length)],
    templates === REPLY_TEMPLATES,
  );
  return text[0].toUpperCase() + text.slice(1);
}

function sentencesOf(next: Random, templates: readonly string[], characters: number): string {
  let out = '';
  while (out.length < characters) out += `${out ? ' ' : ''}${sentence(next, templates)}`;
  return out;
}

/** A user's message: 20..400 characters, most short. */
export function userMessage(next: Random): string {
  return sentencesOf(next, USER_TEMPLATES, 20 + Math.floor(next() ** 2 * 380));
}

/** A personality's reply: 80..1,200 characters. */
export function personalityReply(next: Random): string {
  return sentencesOf(next, REPLY_TEMPLATES, 80 + Math.floor(next() * 1_120));
}

/** One more sentence of a user's chat, to wrap around a statement. */
export function userSentence(next: Random): string {
  return sentence(next, USER_TEMPLATES);
}
