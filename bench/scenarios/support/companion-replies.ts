/**
 * Replies a companion model writes, streamed by the fake provider: several sentences each, the
 * first of very different lengths (4 to 101 characters), as a model's first sentence is.
 */
export const REPLIES = [
  "That sounds like a really long day. It makes sense that you're tired, and it's okay to let the evening be slow. What would help you unwind tonight?",
  'Oh, I love that! Baking bread on a Sunday is such a calm ritual. Did it turn out the way you hoped?',
  "I'm sorry the train let you down again. Waiting around like that wears anyone out, especially after a full day. Did you manage to get home in the end?",
  'It sounds like your sister really cares about you, even if the call was a bit tense. Family conversations about money are hard. How are you feeling about it now?',
  "Congratulations on finishing the report! That's been hanging over you for weeks. How are you going to celebrate?",
  "Hmm. That's a tricky one, and I don't think there's a wrong answer. What matters most to you here: the money, the people, or the work itself?",
  'A walk in the rain can be surprisingly good for the head. Sometimes the weather matches the mood and that helps. What was on your mind while you walked?',
  "You've had a lot on your plate lately, between the move, the job and looking after your dad. It would be strange if you didn't feel stretched. What is one small thing you could take off the list this week?",
  'Yes! Small steps still count. Tell me how the first session went.',
  "I remember you mentioned the noise upstairs before. It's exhausting when home doesn't feel restful. Have you been able to talk to the neighbours about it?",
  "That's a lovely thing to notice about yourself. Being patient with the kids after a hard day isn't easy. Where do you think that patience comes from?",
  'Honestly, leftovers on a cold evening sound perfect to me. Not every dinner needs to be an event. Did you get some rest after?',
];
