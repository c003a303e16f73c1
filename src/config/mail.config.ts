import { registerAs } from '@nestjs/config';
import { IsOptional, IsString, Matches } from 'class-validator';
import { validateEnv } from './validate-env';

class MailEnv {
  @IsOptional()
  @Matches(/^smtps?:\/\//, { message: 'SMTP_URL must be an smtp:// or smtps:// URL' })
  SMTP_URL?: string;

  @IsOptional()
  @IsString()
  MAIL_FROM?: string;
}

export const mailConfig = registerAs('mail', () => {
  const env = validateEnv(MailEnv);
  return {
    smtpUrl: env.SMTP_URL,
    from: env.MAIL_FROM ?? 'Personality API <no-reply@localhost>',
  };
});

export type MailConfig = ReturnType<typeof mailConfig>;
