import { AsyncLocalStorage } from 'node:async_hooks';
import { Client, type QueryConfig } from 'pg';

/** A statement sent, and whether it was sent prepared (under a name: `{ prepared: true }`). */
export interface RecordedStatement {
  text: string;
  prepared: boolean;
}

/**
 * Records the statements a piece of work sends, from the driver (pg's Client#query, which
 * TypeORM's statements pass through too), within the work's own asynchronous context: a
 * background job's statement meanwhile is not counted. Installed for one spec; `uninstall()`
 * puts the driver back.
 */
export class StatementRecorder {
  private readonly recording = new AsyncLocalStorage<RecordedStatement[]>();
  private readonly originalQuery = Client.prototype.query;

  install(): void {
    const { recording, originalQuery } = this;
    Client.prototype.query = function (this: Client, ...args: unknown[]) {
      const statements = recording.getStore();
      const config = args[0] as string | QueryConfig;
      if (statements) {
        statements.push(
          typeof config === 'string'
            ? { text: config, prepared: false }
            : { text: config.text, prepared: config.name !== undefined },
        );
      }
      return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof Client.prototype.query;
  }

  uninstall(): void {
    Client.prototype.query = this.originalQuery;
  }

  /** What `work` answers, and the statements it sent in the order they were sent. */
  async record<T>(work: () => Promise<T>): Promise<{ result: T; statements: RecordedStatement[] }> {
    const statements: RecordedStatement[] = [];
    const result = await this.recording.run(statements, work);
    return { result, statements };
  }
}

/**
 * A statement as a checked-in file shows it: no blank lines or trailing spaces, and the
 * indentation of the source it was written in taken off its lines after the first.
 */
export function readable(text: string): string {
  const [first, ...rest] = text
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line.trim() !== '');
  const indent = Math.min(...rest.map((line) => line.length - line.trimStart().length));
  return [first.trim(), ...rest.map((line) => line.slice(indent))].join('\n');
}

/**
 * One operation's section of a checked-in file. Sorted: reads started at once may reach the
 * driver in either order. A statement sent twice is listed twice; one sent prepared (planned once
 * per session, then by its plan cache) is marked so, as a reviewer needs to know.
 */
export function section(title: string, statements: RecordedStatement[]): string {
  return [
    `-- ${title}`,
    ...statements
      .map(({ text, prepared }) => ({ body: readable(text), prepared }))
      .sort((a, b) => byCodeUnits(a.body, b.body) || Number(a.prepared) - Number(b.prepared))
      .map(({ body, prepared }) => `${prepared ? '-- prepared\n' : ''}${body};`),
  ].join('\n');
}

const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
