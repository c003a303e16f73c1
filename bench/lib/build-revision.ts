import { execFileSync, execSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(__dirname, '../..');

/**
 * Builds `revision` of this repository in a temporary directory, with this checkout's
 * node_modules, so a scenario can run the code before a change beside the code after it.
 */
export function buildRevision(revision: string): {
  dir: string;
  main: string;
  revision: string;
  cleanup: () => void;
} {
  const full = execFileSync('git', ['rev-parse', revision], { cwd: root, encoding: 'utf8' }).trim();
  const dir = mkdtempSync(join(tmpdir(), 'bench-revision-'));
  execSync(`git archive ${full} | tar -x -C ${dir}`, { cwd: root });
  nestBuild(dir);
  return {
    dir,
    main: join(dir, 'dist', 'main.js'),
    revision: full,
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Builds the sources copied into `dir` with this checkout's node_modules (linked in). */
export function nestBuild(dir: string): void {
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  execFileSync(process.execPath, [join(root, 'node_modules/@nestjs/cli/bin/nest.js'), 'build'], {
    cwd: dir,
    stdio: 'ignore',
  });
}
