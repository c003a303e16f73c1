import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * Whoever clones the repository has only the repository: no Markdown file may link outside it
 * (a relative link climbing above the root, e.g. to ../shared), and relative links must resolve.
 */
describe('Markdown links', () => {
  const root = resolve(__dirname, '..');
  const files = execFileSync(
    'git',
    ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'],
    {
      cwd: root,
      encoding: 'utf8',
    },
  )
    .split('\n')
    .filter((file) => file.length > 0);

  it('finds the documentation', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/api.md']));
  });

  it('has no link that leaves the repository or points at nothing', () => {
    const problems: string[] = [];
    for (const file of files) {
      const text = readFileSync(join(root, file), 'utf8');
      for (const match of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)|^\[[^\]]+\]:\s*(\S+)/gm)) {
        const target = (match[1] ?? match[2]).split('#')[0];
        if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
        const absolute = resolve(root, dirname(file), target);
        if (relative(root, absolute).startsWith('..'))
          problems.push(`${file}: ${target} leaves the repository`);
        else if (!existsSync(absolute)) problems.push(`${file}: ${target} does not exist`);
      }
      if (/\.\.\/shared\//.test(text)) problems.push(`${file}: mentions ../shared/`);
    }
    expect(problems).toEqual([]);
  });
});
