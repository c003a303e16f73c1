import { randomUUID } from 'node:crypto';
import { JwtService } from '@nestjs/jwt';
import { Client } from 'pg';
import type { TestingModule } from '@nestjs/testing';
import { SignJWT } from 'jose';
import type { AccessTokenPayload } from '../../src/auth/access-tokens.service';
import { AppError } from '../../src/common/errors/app-error';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import { SsoRepository } from '../../src/sso/sso.repository';
import { SsoModule } from '../../src/sso/sso.module';
import { SsoService } from '../../src/sso/sso.service';
import { Clock } from '../../src/common/time/clock';
import { expectAppError } from '../support/assertions';
import { stopClockAt } from '../support/clocks';
import { eventually } from '../support/wait';
import { type IdTokenOptions, TestOidcProvider } from '../support/jwks-server';
import { freePort } from '../support/ports';
import { moduleAlone } from '../support/module-alone';

/**
 * The SSO module alone on a real PostgreSQL, without HTTP ("medium" spec): SsoService's rules
 * (docs/identity.md#sso-oidc-id_tokens, contract §7) called directly, with id_tokens signed by
 * local OIDC providers whose JWKS is served over real HTTP. What it holds: one identity is one
 * row whoever races for it (the unique (provider, sub) index decides, never a read first); a
 * token that fails any check (signature, algorithm, iss, aud, exp, nbf, sub) links and logs in
 * nothing; one user never reads, unlinks or logs in through another's identity; login issues the
 * linked user's token whatever the password lockout says. The HTTP contract (statuses, the error
 * envelope, API keys refused) stays in test/sso.e2e-spec.ts.
 */
describe('SSO identities (real database)', () => {
  let moduleRef: TestingModule;
  let sso: SsoService;
  let repository: SsoRepository;
  let database: Database;
  let jwt: JwtService;
  let acme: TestOidcProvider;
  let other: TestOidcProvider;
  /** A provider only the cooldown test uses, so that it alone counts its JWKS fetches. */
  let quiet: TestOidcProvider;
  /** A provider whose configured JWKS address nobody serves: its keys cannot be fetched. */
  let down: TestOidcProvider;

  beforeAll(async () => {
    acme = await new TestOidcProvider('acme').start();
    other = await new TestOidcProvider('other').start();
    quiet = await new TestOidcProvider('quiet').start();
    down = await new TestOidcProvider('down').start();
    const unreachable = `http://127.0.0.1:${await freePort()}/jwks.json`;
    moduleRef = await moduleAlone([SsoModule], {
      SMTP_URL: undefined,
      REDIS_URL: undefined,
      SSO_PROVIDERS: JSON.stringify([
        acme.config,
        other.config,
        quiet.config,
        { ...down.config, jwks_uri: unreachable },
      ]),
    });
    sso = moduleRef.get(SsoService);
    repository = moduleRef.get(SsoRepository);
    database = moduleRef.get(Database);
    jwt = moduleRef.get(JwtService);
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(async () => {
    await moduleRef?.close();
    await acme?.stop();
    await other?.stop();
    await quiet?.stop();
    await down?.stop();
  });

  /** A user with a verified address, written straight into the database; answers its id. */
  async function user(): Promise<string> {
    const [row] = await database.rows<{ id: string }>(
      sql`INSERT INTO users (email, password_hash, email_verified_at)
          VALUES (${`user-${randomUUID()}@example.test`}, 'not-a-hash', now()) RETURNING id`,
    );
    return row.id;
  }

  /** A fresh subject, so that no two tests share an identity. */
  const subject = () => `sub-${randomUUID()}`;

  const idToken = (options: IdTokenOptions = {}, provider = acme) => provider.idToken(options);

  /** The rows stored for one identity (provider, sub), whoever they belong to. */
  function rowsOf(provider: string, sub: string) {
    return database.rows<{ user_id: string; email: string | null }>(
      sql`SELECT user_id, email FROM sso_identities
           WHERE provider = ${provider} AND subject = ${sub}`,
    );
  }

  async function identitiesOf(userId: string): Promise<number> {
    const [row] = await database.rows<{ count: number }>(
      sql`SELECT count(*)::int AS count FROM sso_identities WHERE user_id = ${userId}`,
    );
    return row.count;
  }

  /** The access token's claims, checked with the service's own key. */
  const claimsOf = (accessToken: string) => jwt.verify<AccessTokenPayload>(accessToken);

  describe('linking', () => {
    it('links a new identity (created), answers the same row to its user again, and refuses it to another user', async () => {
      const alice = await user();
      const bob = await user();
      const sub = subject();

      const created = await sso.link(alice, 'acme', await idToken({ sub, email: 'a@idp.test' }));
      expect(created).toEqual({
        created: true,
        identity: {
          id: expect.any(String),
          provider: 'acme',
          subject: sub,
          email: 'a@idp.test',
          linked_at: expect.any(String),
        },
      });
      // Again, even with another email claim: the stored row as it was, not rewritten.
      const again = await sso.link(alice, 'acme', await idToken({ sub, email: 'new@idp.test' }));
      expect(again).toEqual({ created: false, identity: created.identity });

      await expectAppError(sso.link(bob, 'acme', await idToken({ sub })), 'sso_identity_taken');
      expect(await rowsOf('acme', sub)).toEqual([{ user_id: alice, email: 'a@idp.test' }]);
      expect(await identitiesOf(bob)).toBe(0);
    });

    it('keeps exactly one row when many first links of one identity race: by one user, and by several', async () => {
      // One user, several devices at once: one creates, the others read the same row.
      const alice = await user();
      const sub = subject();
      const tokens = await Promise.all(Array.from({ length: 6 }, () => idToken({ sub })));
      const links = await Promise.all(tokens.map((token) => sso.link(alice, 'acme', token)));
      expect(links.filter((link) => link.created)).toHaveLength(1);
      expect(new Set(links.map((link) => link.identity.id)).size).toBe(1);
      expect(await rowsOf('acme', sub)).toHaveLength(1);

      // Several users at once: one wins, every other is told it is taken, never a second row.
      for (let round = 0; round < 3; round++) {
        const racers = await Promise.all(Array.from({ length: 5 }, () => user()));
        const racedSub = subject();
        const results = await Promise.allSettled(
          racers.map(async (racer) => sso.link(racer, 'acme', await idToken({ sub: racedSub }))),
        );
        const won = results.flatMap((result, index) =>
          result.status === 'fulfilled' ? [{ userId: racers[index], ...result.value }] : [],
        );
        expect({ round, winners: won.length, created: won[0]?.created }).toEqual({
          round,
          winners: 1,
          created: true,
        });
        for (const result of results) {
          if (result.status === 'rejected') {
            expect(result.reason).toBeInstanceOf(AppError);
            expect((result.reason as AppError).code).toBe('sso_identity_taken');
          }
        }
        expect(await rowsOf('acme', racedSub)).toEqual([{ user_id: won[0].userId, email: null }]);
      }
    });

    it('links in one statement: an identity unlinked and linked again at any moment never fails it', async () => {
      const alice = await user();
      const bob = await user();
      const sub = subject();
      await sso.link(bob, 'acme', await idToken({ sub }));

      // Each read of the identity finds it gone (Bob unlinks) and Bob links it again right
      // after: a link that inserts, then reads what it lost to, would never settle.
      const relink = async () => {
        await database.count(sql`DELETE FROM sso_identities WHERE user_id = ${bob}`);
        await database.count(
          sql`INSERT INTO sso_identities (user_id, provider, subject) VALUES (${bob}, 'acme', ${sub})`,
        );
      };
      const read = repository.findByProviderSubject.bind(repository);
      const reads = jest
        .spyOn(repository, 'findByProviderSubject')
        .mockImplementation(async (provider, subjectId) => {
          await database.count(sql`DELETE FROM sso_identities WHERE user_id = ${bob}`);
          const found = await read(provider, subjectId);
          await relink();
          return found;
        });
      try {
        await expectAppError(sso.link(alice, 'acme', await idToken({ sub })), 'sso_identity_taken');
      } finally {
        reads.mockRestore();
      }
      expect(await rowsOf('acme', sub)).toEqual([{ user_id: bob, email: null }]);

      // Unlinked while Alice's link waits on the row: the link goes to her.
      const { linking } = await database.transaction(async (manager) => {
        await manager.query('DELETE FROM sso_identities WHERE user_id = $1', [bob]);
        const [{ pid }] = await manager.query<Array<{ pid: number }>>(
          'SELECT pg_backend_pid() AS pid',
        );
        const linking = sso.link(alice, 'acme', await idToken({ sub }));
        // Her INSERT is seen waiting for this transaction, whose DELETE holds Bob's row (looked
        // at from a connection of its own: the module's pool is busy with the two).
        const observer = new Client({ connectionString: process.env.DATABASE_URL });
        await observer.connect();
        try {
          await eventually(async () => {
            const { rows } = await observer.query<{ waiting: number }>(
              `SELECT count(*)::int AS waiting FROM pg_stat_activity
                WHERE $1::int = ANY (pg_blocking_pids(pid))`,
              [pid],
            );
            return rows[0].waiting > 0 ? true : undefined;
          }, 'the link waiting for the unlink');
        } finally {
          await observer.end();
        }
        // Not awaited here: it can only end once this transaction has.
        return { linking };
      });
      expect((await linking).created).toBe(true);
      expect(await rowsOf('acme', sub)).toEqual([{ user_id: alice, email: null }]);
    });

    it('treats the same sub at another provider as another identity; a provider’s token names no other provider', async () => {
      const alice = await user();
      const bob = await user();
      const sub = subject();
      await sso.link(alice, 'acme', await idToken({ sub }));
      const elsewhere = await sso.link(bob, 'other', await idToken({ sub }, other));
      expect(elsewhere).toMatchObject({
        created: true,
        identity: { provider: 'other', subject: sub },
      });

      // Other's token presented as acme's (and the reverse) is checked against that provider.
      await expectAppError(
        sso.link(bob, 'acme', await idToken({ sub }, other)),
        'invalid_id_token',
      );
      await expectAppError(sso.link(alice, 'other', await idToken({ sub })), 'invalid_id_token');
      expect(await rowsOf('acme', sub)).toEqual([{ user_id: alice, email: null }]);
      expect(await rowsOf('other', sub)).toEqual([{ user_id: bob, email: null }]);
    });

    it('keeps the email claim only as a string of at most 254 characters; a sub of 1..255', async () => {
      const alice = await user();
      // Longer than an address can be: kept as none, not cut into another address.
      const long = `${'x'.repeat(300)}@idp.test`;
      const sub = subject();
      const { identity } = await sso.link(alice, 'acme', await idToken({ sub, email: long }));
      expect(identity.email).toBeNull();
      expect(await rowsOf('acme', sub)).toEqual([{ user_id: alice, email: null }]);
      const longestAddress = `${'x'.repeat(245)}@idp.test`;
      const kept = subject();
      const linked = await sso.link(
        alice,
        'acme',
        await idToken({ sub: kept, email: longestAddress }),
      );
      expect(linked.identity.email).toBe(longestAddress);

      const longest = 's'.repeat(255);
      await expect(sso.link(alice, 'acme', await idToken({ sub: longest }))).resolves.toMatchObject(
        { created: true, identity: { subject: longest } },
      );
      await expectAppError(
        sso.link(alice, 'acme', await idToken({ sub: 's'.repeat(256) })),
        'invalid_id_token',
      );
      expect(await rowsOf('acme', 's'.repeat(256))).toEqual([]);
    });
  });

  describe('verification of the id_token', () => {
    it('refuses every token that fails a check with invalid_id_token, for link and login, and writes nothing', async () => {
      const alice = await user();
      const sub = subject();
      const forger = await TestOidcProvider.key('RS256', acme.keys[0].kid);
      const now = Math.floor(Date.now() / 1000);
      const claims = { iss: acme.issuer, aud: acme.audience, exp: now + 300, sub };
      const cases: Record<string, string> = {
        'forged signature (published kid)': await idToken({ sub, forgedWith: forger }),
        'wrong audience': await idToken({ sub, audience: 'someone-else' }),
        'wrong issuer': await idToken({ sub, issuer: 'https://evil.example' }),
        'expired beyond the tolerance': await idToken({ sub, expiresIn: -30 }),
        'not valid for another 10 minutes': await idToken({ sub, notBefore: 600 }),
        'a kid the JWKS does not publish': await idToken({ sub, kid: 'no-such-kid' }),
        'HS256 with the public key as secret': await new SignJWT({})
          .setProtectedHeader({ alg: 'HS256', kid: acme.keys[0].kid })
          .setSubject(sub)
          .setIssuer(acme.issuer)
          .setAudience(acme.audience)
          .setExpirationTime(now + 300)
          .sign(new TextEncoder().encode(JSON.stringify(acme.keys[0].publicJwk))),
        'unsigned (alg none)': `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString(
          'base64url',
        )}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`,
        'signed, no exp': await new SignJWT({})
          .setProtectedHeader({ alg: 'RS256', kid: acme.keys[0].kid })
          .setSubject(sub)
          .setIssuer(acme.issuer)
          .setAudience(acme.audience)
          .sign(acme.keys[0].privateKey),
        'signed, no sub': await new SignJWT({})
          .setProtectedHeader({ alg: 'RS256', kid: acme.keys[0].kid })
          .setIssuer(acme.issuer)
          .setAudience(acme.audience)
          .setExpirationTime(now + 300)
          .sign(acme.keys[0].privateKey),
        'not a JWT': 'not-a-jwt',
      };
      for (const [name, token] of Object.entries(cases)) {
        const linked: unknown = await sso.link(alice, 'acme', token).catch((error) => error);
        const loggedIn: unknown = await sso.login('acme', token).catch((error) => error);
        expect({ name, link: codeOf(linked), login: codeOf(loggedIn) }).toEqual({
          name,
          link: 'invalid_id_token',
          login: 'invalid_id_token',
        });
      }
      expect(await identitiesOf(alice)).toBe(0);

      // The same subject, correctly signed, links: the refusals were the tokens', not the sub's.
      await expect(sso.link(alice, 'acme', await idToken({ sub }))).resolves.toMatchObject({
        created: true,
      });
    });

    it('tolerates 5 seconds of clock skew on exp and nbf, no more; accepts RS256 and ES256', async () => {
      const alice = await user();
      const link = async (options: IdTokenOptions) =>
        sso.link(alice, 'acme', await idToken({ sub: subject(), ...options }));
      await expect(link({ expiresIn: -2 })).resolves.toMatchObject({ created: true });
      await expect(link({ notBefore: 2 })).resolves.toMatchObject({ created: true });
      await expectAppError(link({ expiresIn: -15 }), 'invalid_id_token');
      await expectAppError(link({ notBefore: 15 }), 'invalid_id_token');
      await expect(link({ kid: acme.keys[1].kid })).resolves.toMatchObject({ created: true });
      expect(acme.keys[1].alg).toBe('ES256');
      expect(await identitiesOf(alice)).toBe(3);
    });

    it('checks exp and nbf against the service’s Clock, not the machine’s', async () => {
      const alice = await user();
      const fresh = await idToken({ sub: subject() });
      const later = await idToken({ sub: subject(), notBefore: 7200, expiresIn: 9000 });
      // Two hours on by the service's time: the fresh token has expired, the later one is due.
      stopClockAt(moduleRef.get(Clock), Date.now() + 7200_000);
      await expectAppError(sso.link(alice, 'acme', fresh), 'invalid_id_token');
      await expect(sso.link(alice, 'acme', later)).resolves.toMatchObject({ created: true });
      expect(await identitiesOf(alice)).toBe(1);
    });

    it('answers unknown_provider for a provider that is not configured, before any key is fetched', async () => {
      const alice = await user();
      const fetches = acme.jwksRequests;
      await expectAppError(sso.link(alice, 'nope', await idToken()), 'unknown_provider');
      await expectAppError(sso.login('nope', await idToken()), 'unknown_provider');
      // Provider ids are matched exactly, as configured.
      await expectAppError(sso.login('ACME', await idToken()), 'unknown_provider');
      expect(acme.jwksRequests).toBe(fetches);
      expect(await identitiesOf(alice)).toBe(0);
    });

    it('answers invalid_id_token, not an unexpected error, when the provider’s JWKS cannot be fetched', async () => {
      const alice = await user();
      // Signed right for "down", whose configured JWKS address answers nothing.
      const token = await down.idToken({ sub: subject() });
      await expectAppError(sso.link(alice, 'down', token), 'invalid_id_token');
      await expectAppError(sso.login('down', token), 'invalid_id_token');
      expect(down.jwksRequests).toBe(0);
      expect(await identitiesOf(alice)).toBe(0);
    });

    it('made-up kids do not make it fetch the JWKS again within the cooldown', async () => {
      const alice = await user();
      await sso.link(alice, 'quiet', await quiet.idToken({ sub: subject() }));
      expect(quiet.jwksRequests).toBe(1);
      for (let i = 0; i < 5; i++) {
        await expectAppError(
          sso.link(alice, 'quiet', await quiet.idToken({ kid: `made-up-${i}` })),
          'invalid_id_token',
        );
      }
      // One more fetch at most: the 5 s cooldown may have ended on a slow machine, once.
      expect(quiet.jwksRequests).toBeLessThanOrEqual(2);
    });
  });

  describe('login', () => {
    it('issues the linked user’s access token, with their current token version; an unlinked identity is unauthenticated', async () => {
      const alice = await user();
      const sub = subject();
      await expectAppError(sso.login('acme', await idToken({ sub })), 'unauthenticated');

      await sso.link(alice, 'acme', await idToken({ sub }));
      const first = await sso.login('acme', await idToken({ sub }));
      expect(first).toEqual({
        access_token: expect.any(String),
        token_type: 'Bearer',
        expires_in: expect.any(Number),
      });
      expect(claimsOf(first.access_token)).toMatchObject({ sub: alice, ver: 0 });

      // A password reset raises the version: the next SSO login carries the new one.
      await database.count(sql`UPDATE users SET token_version = 3 WHERE id = ${alice}`);
      const after = await sso.login('acme', await idToken({ sub }));
      expect(claimsOf(after.access_token)).toMatchObject({ sub: alice, ver: 3 });
      // Logging in never links or writes: still the one row.
      expect(await rowsOf('acme', sub)).toHaveLength(1);
    });

    it('a login straddling a password reset gets a token the reset ends, never one of the new version', async () => {
      const alice = await user();
      const sub = subject();
      await sso.link(alice, 'acme', await idToken({ sub }));
      // The reset (it unlinks and raises the version in one transaction) commits just after the
      // login has read the identity.
      const read = repository.findByProviderSubject.bind(repository);
      const reads = jest
        .spyOn(repository, 'findByProviderSubject')
        .mockImplementationOnce(async (provider, subjectId) => {
          const found = await read(provider, subjectId);
          await database.transaction(async (manager) => {
            await manager.query('DELETE FROM sso_identities WHERE user_id = $1', [alice]);
            await manager.query(
              'UPDATE users SET token_version = token_version + 1 WHERE id = $1',
              [alice],
            );
          });
          return found;
        });
      try {
        const straddling = await sso.login('acme', await idToken({ sub }));
        // Before, the user was read again after the reset: version 1, a token that worked.
        expect(claimsOf(straddling.access_token)).toMatchObject({ sub: alice, ver: 0 });
      } finally {
        reads.mockRestore();
      }
      await expectAppError(sso.login('acme', await idToken({ sub })), 'unauthenticated');
    });

    it('concurrent logins of one identity each get the same user’s token and write nothing', async () => {
      const alice = await user();
      const sub = subject();
      await sso.link(alice, 'acme', await idToken({ sub }));
      const tokens = await Promise.all(Array.from({ length: 5 }, () => idToken({ sub })));
      const logins = await Promise.all(tokens.map((token) => sso.login('acme', token)));
      expect(logins.map((login) => claimsOf(login.access_token).sub)).toEqual(Array(5).fill(alice));
      expect(await rowsOf('acme', sub)).toHaveLength(1);
    });

    it('is not subject to the password lockout', async () => {
      const alice = await user();
      const sub = subject();
      await sso.link(alice, 'acme', await idToken({ sub }));
      await database.count(
        sql`INSERT INTO login_attempts (email, failures, locked_at)
            SELECT lower(email), ARRAY[now()], now() FROM users WHERE id = ${alice}`,
      );
      const login = await sso.login('acme', await idToken({ sub }));
      expect(claimsOf(login.access_token).sub).toBe(alice);
    });

    it('a deleted user’s identity goes with them: their sub logs in no one and is free to link', async () => {
      const alice = await user();
      const bob = await user();
      const sub = subject();
      await sso.link(alice, 'acme', await idToken({ sub }));
      await database.count(sql`DELETE FROM users WHERE id = ${alice}`);
      await expectAppError(sso.login('acme', await idToken({ sub })), 'unauthenticated');
      await expect(sso.link(bob, 'acme', await idToken({ sub }))).resolves.toMatchObject({
        created: true,
      });
    });
  });

  describe('one user’s identities', () => {
    it('lists only the caller’s identities, oldest first, a page at a time', async () => {
      const alice = await user();
      const bob = await user();
      const subs = [subject(), subject(), subject()];
      const ids: string[] = [];
      for (const sub of subs)
        ids.push((await sso.link(alice, 'acme', await idToken({ sub }))).identity.id);
      await sso.link(bob, 'acme', await idToken({ sub: subject() }));

      const first = await sso.list(alice, 2);
      expect(first.data.map((identity) => identity.id)).toEqual(ids.slice(0, 2));
      expect(first.has_more).toBe(true);
      const second = await sso.list(alice, 2, ids[1]);
      expect(second).toEqual({ data: [expect.objectContaining({ id: ids[2] })], has_more: false });
      expect((await sso.list(alice, 10)).data.map((identity) => identity.subject)).toEqual(subs);

      // Bob's cursor into Alice's list reads nothing of hers.
      const bobs = await sso.list(bob, 10);
      expect(bobs.data).toHaveLength(1);
      expect(ids).not.toContain(bobs.data[0].id);
      expect((await sso.list(bob, 10, ids[0])).data).toEqual([]);
    });

    it('unlinks only the caller’s identity: another user’s is not_found and stays; an unlinked one logs in no one', async () => {
      const alice = await user();
      const bob = await user();
      const sub = subject();
      const { identity } = await sso.link(alice, 'acme', await idToken({ sub }));

      await expectAppError(sso.unlink(bob, identity.id), 'not_found');
      expect(await rowsOf('acme', sub)).toHaveLength(1);
      await expect(sso.login('acme', await idToken({ sub }))).resolves.toMatchObject({
        token_type: 'Bearer',
      });

      await sso.unlink(alice, identity.id);
      await expectAppError(sso.unlink(alice, identity.id), 'not_found');
      await expectAppError(sso.unlink(alice, randomUUID()), 'not_found');
      await expectAppError(sso.login('acme', await idToken({ sub })), 'unauthenticated');
      // Free again: Bob may link it now.
      await expect(sso.link(bob, 'acme', await idToken({ sub }))).resolves.toMatchObject({
        created: true,
      });
    });
  });
});

function codeOf(error: unknown): string {
  return error instanceof AppError ? error.code : `not an AppError: ${String(error)}`;
}
