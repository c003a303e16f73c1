/**
 * 30 facts an end user states about themselves in a conversation, and for each a question asked
 * later, worded differently, sharing at least one content word (after English stemming) with the
 * statement. Written for bench/scenarios/memory-recall-quality.ts before its first run, and not
 * changed after it: the misses it reports are the search's, not a set tuned to pass.
 *
 * Some questions share a rare word with their statement ("greyhound", "marathon"), others only a
 * word everyday chat is full of ("flat", "coffee", "brother", "long"), as people ask.
 */
export const RECALL_SET: ReadonlyArray<{ statement: string; question: string }> = [
  {
    statement: "My sister's name is Clara, she's two years older than me.",
    question: 'Do you remember what my sister is called?',
  },
  {
    statement: 'I adopted a greyhound called Pixel last spring.',
    question: 'What was the name of my greyhound again?',
  },
  {
    statement: 'I work night shifts at the bakery on Elm Street.',
    question: 'Which bakery did I say I work at?',
  },
  {
    statement: "I'm allergic to peanuts, even a tiny bit makes me really ill.",
    question: "Can you remind me what food I'm allergic to?",
  },
  {
    statement: "My favourite band is Radiohead, I've seen them live twice.",
    question: 'Which band did I tell you I love?',
  },
  {
    statement: 'I grew up in a small fishing town near Porto.',
    question: 'What town did I grow up in?',
  },
  {
    statement: 'My daughter Mia just started learning the violin.',
    question: 'What instrument is my daughter learning?',
  },
  {
    statement: "I'm training for the Berlin marathon in September.",
    question: 'Which marathon am I training for?',
  },
  {
    statement: 'My car is an old blue Volvo that keeps breaking down.',
    question: 'What kind of car do I drive?',
  },
  {
    statement: "I've been learning Japanese for about two years now.",
    question: 'How long have I been studying Japanese?',
  },
  {
    statement: 'My best friend Tom moved to Canada last year.',
    question: 'Where did my best friend move to?',
  },
  {
    statement: "I'm vegetarian, I stopped eating meat when I was sixteen.",
    question: 'Do I eat meat?',
  },
  {
    statement: 'My grandmother taught me to bake bread on Sundays.',
    question: 'Who taught me how to bake?',
  },
  {
    statement: "I'm terrified of spiders, I can't even look at pictures of them.",
    question: "Remind me what I said I'm terrified of?",
  },
  {
    statement: 'My birthday is on the 14th of March.',
    question: 'When is my birthday?',
  },
  {
    statement: 'I play five-a-side football every Thursday evening.',
    question: 'What sport do I play during the week?',
  },
  {
    statement: "My partner Sam is a nurse at the children's hospital.",
    question: 'What does my partner do for a living?',
  },
  {
    statement: 'I live in a tiny flat above a laundrette in Leeds.',
    question: "What's underneath my flat?",
  },
  {
    statement: 'My cat Biscuit is nineteen years old and still chases birds.',
    question: 'How old is my cat?',
  },
  {
    statement: 'I drink my coffee black with no sugar.',
    question: 'How do I take my coffee?',
  },
  {
    statement: 'I broke my left wrist skateboarding when I was twelve.',
    question: 'Which wrist did I break as a kid?',
  },
  {
    statement: 'My dream is to open a little bookshop by the sea one day.',
    question: "What's the dream I told you about?",
  },
  {
    statement: 'I studied marine biology at university.',
    question: 'What subject did I study at uni?',
  },
  {
    statement: 'My brother Luca is getting married in June.',
    question: "When is my brother's wedding?",
  },
  {
    statement: "I'm saving up for a trip to Iceland to see the northern lights.",
    question: 'Where am I saving up to travel to?',
  },
  {
    statement: "I've been sober for three years now.",
    question: 'How long have I been sober?',
  },
  {
    statement: "My favourite meal is my mum's lasagne.",
    question: "What's my favourite meal?",
  },
  {
    statement: "I'm left-handed, so writing in notebooks gets messy.",
    question: 'Am I left or right handed?',
  },
  {
    statement: 'I volunteer at the animal shelter every other Saturday.',
    question: 'Where do I volunteer on weekends?',
  },
  {
    statement: 'My first job was delivering newspapers on my bike.',
    question: 'What was my very first job?',
  },
];
