import { join } from 'node:path';

/**
 * Every mail the service sends, by template: `<name>.hbs` (HTML) and `<name>.text.hbs` (text),
 * beside this file in src/ and in dist/ (nest-cli.json's asset rule for templates copies them).
 */
export const MAIL_TEMPLATES = [
  'password-reset',
  'verify-email',
  'lockout-notice',
  'invitation',
  'webhook-endpoint-disabled',
] as const;
export type MailTemplate = (typeof MAIL_TEMPLATES)[number];

export const MAIL_TEMPLATE_DIR = join(__dirname, 'templates');

/** The files of every template, relative to MAIL_TEMPLATE_DIR. */
export const MAIL_TEMPLATE_FILES = MAIL_TEMPLATES.flatMap((name) => [
  `${name}.hbs`,
  `${name}.text.hbs`,
]);
