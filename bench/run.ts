import { writeResults } from './lib/results';

/** `npm run bench -- <scenario>`: runs bench/scenarios/<scenario>.ts and records its figures. */
async function main(): Promise<void> {
  const names = process.argv.slice(2);
  if (names.length === 0) throw new Error('usage: npm run bench -- <scenario> [<scenario> …]');
  for (const name of names) {
    if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`bad scenario name: ${name}`);
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- scenarios are chosen at run time
    const scenario = require(`./scenarios/${name}`) as {
      run: () => Promise<Record<string, unknown>>;
    };
    const figures = await scenario.run();
    const file = writeResults(name, figures);
    process.stdout.write(`${JSON.stringify(figures, null, 2)}\nwritten to ${file}\n`);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
