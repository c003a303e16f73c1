import { AsyncLocalStorage } from 'node:async_hooks';
import { Client, type QueryConfig } from 'pg';

/**
 * Records the statements a piece of work sends, from the driver (pg's Client#query, which
 * TypeORM's statements pass through too), within the work's own asynchronous context: a
 * background job's statement meanwhile is not counted. Installed for one spec; `uninstall()`
 * puts the driver back.
 */
export class StatementRecorder {
  private readonly recording = new AsyncLocalStorage<string[]>();
  private readonly originalQuery = Client.prototype.query;

  install(): void {
    const { recording, originalQuery } = this;
    Client.prototype.query = function (this: Client, ...args: unknown[]) {
      const statements = recording.getStore();
      const config = args[0] as string | QueryConfig;
      if (statements) statements.push(typeof config === 'string' ? config : config.text);
      return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof Client.prototype.query;
  }

  uninstall(): void {
    Client.prototype.query = this.originalQuery;
  }

  /** What `work` answers, and the statements it sent in the order they were sent. */
  async record<T>(work: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
    const statements: string[] = [];
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
 * driver in either order. A statement sent twice is listed twice.
 */
export function section(title: string, statements: string[]): string {
  return [
    `-- ${title}`,
    ...statements
      .map(readable)
      .sort()
      .map((text) => `${text};`),
  ].join('\n');
}
