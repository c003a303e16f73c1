import { pointerToken } from './json-schema-problems';
import type { JsonEvents, TextInfo } from './json-tokenizer';

/** What one piece may hold: its memory is bounded whatever the input. */
export interface PieceBudget {
  /** Values (strings, numbers, literals, objects, arrays) and keys. */
  maxValues: number;
  /** UTF-16 code units of all its strings and keys together. */
  maxCharacters: number;
}

/**
 * A piece: the value and the characters of its strings and keys, or why it was not built
 * (`problem`, at `at`, a JSON pointer inside the piece). `index` is the item's index, or null
 * for a value that is not an array.
 */
export type Piece =
  | { index: number | null; value: unknown; characters: number }
  | { index: number | null; problem: string; at: string };

type Container = Record<string, unknown> | unknown[];

interface Frame {
  container: Container;
  /** The key the object's next value is for. */
  key: string;
  /** The pointer token of the value being read in it (a key, or an array index). */
  position: string;
  items: number;
}

/**
 * Builds the pieces of one JSON value as a JsonTokenizer reads it: the items of an array, one at
 * a time (`index` 0, 1, …), or the value itself when it is not an array (`index` null). A piece is
 * handed on as soon as it is complete and kept by nobody here, so memory holds one piece at a
 * time. A piece past its budget, or holding a string or key the tokenizer cut short, is not
 * built: its problem is handed on instead, and the rest of it is only read.
 *
 * Objects are plain objects: the input has been checked for prototype keys before (a spooled
 * document's scan refuses FORBIDDEN_KEYS: `__proto__`, `constructor`, `prototype` and the names
 * of Object.prototype's members).
 */
export class JsonPieceReader implements JsonEvents {
  private depth = 0;
  /** 1: the value is an array and its items are the pieces; 0: the value is the piece. */
  private pieceDepth = -1;
  private index = 0;
  private readonly frames: Frame[] = [];
  private built: unknown;
  private problem: { problem: string; at: string } | undefined;
  private values = 0;
  private characters = 0;

  constructor(
    private readonly budget: PieceBudget,
    private readonly onPiece: (piece: Piece) => void,
  ) {}

  startObject(): void {
    this.open({});
  }

  endObject(): void {
    this.close();
  }

  startArray(): void {
    if (this.pieceDepth === -1) {
      this.pieceDepth = 1;
      this.depth = 1;
      return;
    }
    this.open([]);
  }

  endArray(): void {
    if (this.depth === 1 && this.pieceDepth === 1) {
      this.depth = 0;
      return;
    }
    this.close();
  }

  key(name: string, info: TextInfo): void {
    if (this.problem) return;
    const frame = this.frames[this.frames.length - 1];
    frame.key = name;
    frame.position = pointerToken(name);
    if (info.truncated)
      return this.fail(this.pointer(), "holds a key longer than a document's keys may be");
    this.spend(name.length);
  }

  string(value: string, info: TextInfo): void {
    this.begin();
    if (!this.problem) {
      if (info.truncated) this.fail(this.pointer(), "is longer than a document's strings may be");
      else if (this.spend(value.length)) this.place(value);
    }
    this.end();
  }

  number(value: number): void {
    this.scalar(value);
  }

  literal(value: boolean | null): void {
    this.scalar(value);
  }

  private scalar(value: unknown): void {
    this.begin();
    if (!this.problem && this.spend(0)) this.place(value);
    this.end();
  }

  private open(container: Container): void {
    this.begin();
    this.depth++;
    if (this.problem || !this.spend(0)) return;
    this.place(container);
    this.frames.push({ container, key: '', position: '', items: 0 });
  }

  private close(): void {
    this.depth--;
    if (!this.problem) this.frames.pop();
    this.end();
  }

  /** A value starts: a new piece, or the next position in its container. */
  private begin(): void {
    if (this.pieceDepth === -1) this.pieceDepth = 0;
    if (this.depth === this.pieceDepth) {
      this.built = undefined;
      this.problem = undefined;
      this.values = 0;
      this.characters = 0;
      this.frames.length = 0;
      return;
    }
    const frame = this.frames[this.frames.length - 1];
    if (!this.problem && Array.isArray(frame.container)) frame.position = String(frame.items++);
  }

  /** A value ended: at the piece's depth, the piece is complete. */
  private end(): void {
    if (this.depth !== this.pieceDepth) return;
    const index = this.pieceDepth === 1 ? this.index++ : null;
    this.onPiece(
      this.problem
        ? { index, ...this.problem }
        : { index, value: this.built, characters: this.characters },
    );
    this.built = undefined;
    this.problem = undefined;
    this.frames.length = 0;
  }

  private place(value: unknown): void {
    const frame = this.frames[this.frames.length - 1];
    if (!frame) this.built = value;
    else if (Array.isArray(frame.container)) frame.container.push(value);
    else frame.container[frame.key] = value;
  }

  /** Counts a value of `characters` against the budget; past it, the piece is not built. */
  private spend(characters: number): boolean {
    this.values++;
    this.characters += characters;
    if (this.values <= this.budget.maxValues && this.characters <= this.budget.maxCharacters) {
      return true;
    }
    this.fail(
      '',
      `is larger than one item of a document may be (${this.budget.maxValues} values, ${this.budget.maxCharacters} characters)`,
    );
    return false;
  }

  private fail(at: string, problem: string): void {
    this.problem = { at, problem };
    this.built = undefined;
    this.frames.length = 0;
  }

  /** The pointer, inside the piece, of the value being read. */
  private pointer(): string {
    return this.frames.map((frame) => `/${frame.position}`).join('');
  }
}
