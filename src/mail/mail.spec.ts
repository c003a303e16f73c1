import { existsSync, readFileSync } from 'node:fs';
import { join, matchesGlob, relative } from 'node:path';
import { MAIL_TEMPLATE_DIR, MAIL_TEMPLATE_FILES } from './mail-templates';
import { linkTo } from './mail.service';
import { maskAddress } from '../common/logging/mask-address';

interface NestCliConfig {
  sourceRoot: string;
  compilerOptions: { assets: Array<string | { include: string }> };
}

describe('mail', () => {
  it('has every template beside the module, where dist/ will look for them', () => {
    for (const file of MAIL_TEMPLATE_FILES) {
      expect({ file, exists: existsSync(join(MAIL_TEMPLATE_DIR, file)) }).toEqual({
        file,
        exists: true,
      });
    }
  });

  it('has its templates copied into dist/ by an asset rule of nest-cli.json', () => {
    const root = join(__dirname, '..', '..');
    const cli = JSON.parse(readFileSync(join(root, 'nest-cli.json'), 'utf8')) as NestCliConfig;
    const includes = cli.compilerOptions.assets.map((asset) =>
      typeof asset === 'string' ? asset : asset.include,
    );
    for (const file of MAIL_TEMPLATE_FILES) {
      const path = relative(join(root, cli.sourceRoot), join(MAIL_TEMPLATE_DIR, file));
      expect({ path, copied: includes.some((glob) => matchesGlob(path, glob)) }).toEqual({
        path,
        copied: true,
      });
    }
  });

  it('builds a link from the public URL, the path and the token only', () => {
    expect(linkTo('https://app.example', { path: '/reset-password', token: 'abc_-9' })).toBe(
      'https://app.example/reset-password?token=abc_-9',
    );
  });

  it('masks addresses for the log', () => {
    expect(maskAddress('ada@example.com')).toBe('a***@example.com');
    expect(maskAddress('nonsense')).toBe('***');
  });
});
