import type { DocumentRange, SpooledDocument } from '../common/http/spooled-document';
import { MAX_KEY_LENGTH } from '../common/http/spooled-document';
import { JsonPieceReader, type Piece, type PieceBudget } from '../common/validation/json-pieces';
import { JsonTokenizer } from '../common/validation/json-tokenizer';
import { MAX_DOCUMENT_DEPTH } from '../common/validation/untrusted-json';

/**
 * What one part of a document (a memory, a personality, the end user) may hold: more than the
 * largest the API takes (a personality's 120 reply templates of 4,000 characters, its prompt of
 * 20,000), and little enough that a batch of them is a few megabytes.
 */
export const PIECE_BUDGET: PieceBudget = { maxValues: 20_000, maxCharacters: 1_048_576 };

/** Longer than any string field of a PMF document may be (a reply: 32,000 characters). */
const MAX_STRING_LENGTH = 65_536;

/**
 * The pieces of one member of a spooled document (docs/pmf-v1.md#import): its items one at a time
 * when it is an array, else its value, read from the file a chunk at a time. Only the pieces of
 * one chunk are held at once.
 */
export async function* piecesOf(
  document: SpooledDocument,
  range: DocumentRange,
): AsyncGenerator<Piece> {
  const ready: Piece[] = [];
  const tokenizer = new JsonTokenizer(
    new JsonPieceReader(PIECE_BUDGET, (piece) => ready.push(piece)),
    {
      maxDepth: MAX_DOCUMENT_DEPTH,
      maxStringLength: MAX_STRING_LENGTH,
      maxKeyLength: MAX_KEY_LENGTH,
    },
  );
  for await (const chunk of document.read(range)) {
    tokenizer.write(chunk);
    yield* ready.splice(0);
  }
  tokenizer.end();
  yield* ready.splice(0);
}
