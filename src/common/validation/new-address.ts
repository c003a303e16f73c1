import { applyDecorators } from '@nestjs/common';
import { IsEmail } from 'class-validator';
import { NoLookalikes } from './no-lookalikes';

/**
 * An address an account or an invitation is made for: an e-mail address whose local part is not
 * quoted, holding no lookalike (NoLookalikes). A quoted local part (`"a b"@corp.test`) may hold
 * spaces and punctuation, so an inviter's address read as the service's own words in the mail
 * that names it, and `"bob"@corp.test` made a second account for bob@corp.test's mailbox (found
 * by review). Signing in and asking for a reset still take any address: an account made before
 * keeps working.
 */
export const IsNewAddress = () =>
  applyDecorators(
    IsEmail(
      { blacklisted_chars: '"' },
      { message: 'email must be an e-mail address whose local part is not quoted' },
    ),
    NoLookalikes(),
  );
