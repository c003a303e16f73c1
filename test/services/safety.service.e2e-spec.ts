import type { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import type { ApiKeyCaller, Scope, UserCaller } from '../../src/common/auth/caller';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import type { UpdateSafetySettingsDto } from '../../src/safety/dto/safety-settings.dto';
import { ReplySafety } from '../../src/safety/reply-safety.service';
import { SAFETY_CLASSIFIER, type SafetyClassifier } from '../../src/safety/safety-categories';
import {
  DEFAULT_CRISIS_MESSAGE,
  SafetySettingsService,
} from '../../src/safety/safety-settings.service';
import { SafetyModule } from '../../src/safety/safety.module';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';

/** Messages the local classifier puts in these categories (docs/safety.md). */
const SELF_HARM = 'I want to kill myself';
const VIOLENCE = "I'm going to stab him tomorrow";
const BOTH = "I want to kill myself and I'm going to stab him tomorrow";
const FIGURATIVE = 'this commute is killing me';
const CLEAN = 'Shall we talk about tea?';

const DEFAULTS = {
  crisis_response: 'on',
  crisis_message: DEFAULT_CRISIS_MESSAGE,
  input_moderation: 'flag',
  output_moderation: 'block',
};

/**
 * The safety module alone on a real PostgreSQL, without HTTP ("medium" spec), with the local
 * classifier: SafetySettingsService's rules (defaults, PATCH, who may, which organization) and
 * ReplySafety's decisions under the settings as written, called directly. The contract over
 * HTTP (validation of the body, status codes, replies) stays in safety.e2e-spec.ts.
 */
describe('Safety module (real database)', () => {
  let moduleRef: TestingModule;
  let settings: SafetySettingsService;
  let safety: ReplySafety;
  let classifier: SafetyClassifier;
  let database: Database;
  let factory: Factory;
  const signal = new AbortController().signal;

  beforeAll(async () => {
    moduleRef = await moduleAlone([SafetyModule], { SAFETY_CLASSIFIER: 'local' });
    settings = moduleRef.get(SafetySettingsService);
    safety = moduleRef.get(ReplySafety);
    classifier = moduleRef.get<SafetyClassifier>(SAFETY_CLASSIFIER);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(() => moduleRef?.close());
  afterEach(() => jest.restoreAllMocks());

  function key(organizationId: string, scopes: Scope[] = ['admin']): ApiKeyCaller {
    return { kind: 'api_key', apiKeyId: randomUUID(), organizationId, scopes };
  }

  /** The organization's row as stored; undefined while it has none. */
  function row(organizationId: string) {
    return database.row<Record<string, unknown>>(
      sql`SELECT crisis_response, crisis_message, input_moderation, output_moderation
            FROM organization_safety_settings WHERE organization_id = ${organizationId}`,
    );
  }

  /** A fresh organization with these settings, written by the service. */
  async function organizationWith(patch: UpdateSafetySettingsDto): Promise<string> {
    const organizationId = await factory.organization();
    await settings.update(key(organizationId), organizationId, patch);
    return organizationId;
  }

  describe('SafetySettingsService', () => {
    it('an organization without a row has the defaults, for GET and for replies, and reading writes nothing', async () => {
      const organizationId = await factory.organization();
      expect(await settings.get(key(organizationId, ['read']), organizationId)).toEqual(DEFAULTS);
      expect(DEFAULT_CRISIS_MESSAGE).toContain('988');
      expect(await settings.forReply(organizationId)).toEqual({
        crisisResponse: true,
        crisisMessage: DEFAULT_CRISIS_MESSAGE,
        inputModeration: 'flag',
        outputModeration: 'block',
      });
      expect(await row(organizationId)).toBeUndefined();
    });

    it('a PATCH writes the fields it names and keeps the others; null restores the default message', async () => {
      const organizationId = await factory.organization();
      const admin = key(organizationId);

      // The first PATCH inserts the row: the fields it does not name take the defaults.
      expect(await settings.update(admin, organizationId, { input_moderation: 'block' })).toEqual({
        ...DEFAULTS,
        input_moderation: 'block',
      });
      // The default message is kept as null, not copied: a later change of it reaches this row.
      expect(await row(organizationId)).toEqual({
        crisis_response: true,
        crisis_message: null,
        input_moderation: 'block',
        output_moderation: 'block',
      });

      await settings.update(admin, organizationId, { crisis_message: 'Call 988.\nYou matter.' });
      await settings.update(admin, organizationId, { crisis_response: 'off' });
      expect(await settings.update(admin, organizationId, { output_moderation: 'off' })).toEqual({
        crisis_response: 'off',
        crisis_message: 'Call 988.\nYou matter.',
        input_moderation: 'block',
        output_moderation: 'off',
      });
      // An empty PATCH changes nothing.
      await settings.update(admin, organizationId, {});
      expect(await row(organizationId)).toEqual({
        crisis_response: false,
        crisis_message: 'Call 988.\nYou matter.',
        input_moderation: 'block',
        output_moderation: 'off',
      });

      expect(await settings.update(admin, organizationId, { crisis_message: null })).toMatchObject({
        crisis_message: DEFAULT_CRISIS_MESSAGE,
        crisis_response: 'off',
      });
      expect(await row(organizationId)).toMatchObject({
        crisis_message: null,
        input_moderation: 'block',
      });
      // Every change is in the audit log, by whom and as the PATCH named it; the empty one is not.
      const audited = await database.rows<{
        actor_id: string;
        target_id: string;
        details: unknown;
      }>(
        sql`SELECT actor_id, target_id, details FROM audit_events
             WHERE organization_id = ${organizationId} AND action = 'safety_settings.updated'`,
      );
      // The events' ids are not in their order: compared as a set.
      expect(audited).toHaveLength(5);
      expect(audited.map(({ details }) => details)).toEqual(
        expect.arrayContaining([
          { input_moderation: 'block' },
          { crisis_message: 'Call 988.\nYou matter.' },
          { crisis_response: 'off' },
          { output_moderation: 'off' },
          { crisis_message: null },
        ]),
      );
      expect(new Set(audited.map(({ actor_id, target_id }) => `${actor_id} ${target_id}`))).toEqual(
        new Set([`${admin.apiKeyId} ${organizationId}`]),
      );
    });

    it('concurrent PATCHes of different fields all land, from an organization without a row on', async () => {
      const organizationId = await factory.organization();
      const admin = key(organizationId);
      for (const [round, values] of [
        ['off', 'Call 111', 'off', 'flag'],
        ['on', 'Call 222', 'block', 'off'],
        ['off', 'Call 333', 'flag', 'block'],
      ].entries()) {
        const [crisisResponse, crisisMessage, input, output] = values as [
          'on' | 'off',
          string,
          'off' | 'flag' | 'block',
          'off' | 'flag' | 'block',
        ];
        // Round 0 races four INSERTs of the missing row: ON CONFLICT makes three of them updates.
        const answers = await Promise.all([
          settings.update(admin, organizationId, { crisis_response: crisisResponse }),
          settings.update(admin, organizationId, { crisis_message: crisisMessage }),
          settings.update(admin, organizationId, { input_moderation: input }),
          settings.update(admin, organizationId, { output_moderation: output }),
        ]);
        expect(answers[0].crisis_response).toBe(crisisResponse);
        expect(answers[1].crisis_message).toBe(crisisMessage);
        expect(answers[2].input_moderation).toBe(input);
        expect(answers[3].output_moderation).toBe(output);
        expect({ round, settings: await settings.get(admin, organizationId) }).toEqual({
          round,
          settings: {
            crisis_response: crisisResponse,
            crisis_message: crisisMessage,
            input_moderation: input,
            output_moderation: output,
          },
        });
      }
    });

    it('a read key reads but may not change: insufficient_scope, and nothing written', async () => {
      const organizationId = await factory.organization();
      const reader = key(organizationId, ['read']);
      await expectAppError(
        settings.update(reader, organizationId, { crisis_response: 'off' }),
        'insufficient_scope',
      );
      await expectAppError(
        settings.update(key(organizationId, ['read_write']), organizationId, {
          input_moderation: 'off',
        }),
        'insufficient_scope',
      );
      expect(await row(organizationId)).toBeUndefined();
      expect(await settings.get(reader, organizationId)).toEqual(DEFAULTS);
    });

    it('one organization’s settings are never read or changed through another’s caller', async () => {
      const theirs = await organizationWith({
        crisis_message: 'Their own line',
        input_moderation: 'block',
      });
      const mine = await factory.organization();
      // Their settings are cached for replies: a wrong write must not hide behind the cache.
      const theirsBefore = await settings.forReply(theirs);

      const myAdminKey = key(mine);
      const stranger: UserCaller = {
        kind: 'user',
        userId: randomUUID(),
        organizationId: mine,
        scopes: ['admin'],
      };
      for (const caller of [myAdminKey, stranger]) {
        await expectAppError(settings.get(caller, theirs), 'not_found');
        await expectAppError(
          settings.update(caller, theirs, { input_moderation: 'off', crisis_message: 'Hijacked' }),
          'not_found',
        );
      }
      expect(await row(theirs)).toEqual({
        crisis_response: true,
        crisis_message: 'Their own line',
        input_moderation: 'block',
        output_moderation: 'block',
      });

      // My PATCH writes my row only.
      await settings.update(myAdminKey, mine, { input_moderation: 'off', crisis_response: 'off' });
      expect(await settings.forReply(theirs)).toEqual(theirsBefore);
      expect(await settings.get(key(theirs, ['read']), theirs)).toMatchObject({
        crisis_response: 'on',
        crisis_message: 'Their own line',
        input_moderation: 'block',
      });
      expect(await settings.get(myAdminKey, mine)).toMatchObject({
        crisis_response: 'off',
        crisis_message: DEFAULT_CRISIS_MESSAGE,
        input_moderation: 'off',
      });
    });

    it('replies apply a PATCH at once: the cached settings are dropped', async () => {
      const organizationId = await factory.organization();
      expect((await settings.forReply(organizationId)).inputModeration).toBe('flag');
      await settings.update(key(organizationId), organizationId, {
        input_moderation: 'block',
        crisis_message: 'Call 988 now',
      });
      expect(await settings.forReply(organizationId)).toMatchObject({
        inputModeration: 'block',
        crisisMessage: 'Call 988 now',
      });
      await expect(safety.screenMessage(organizationId, VIOLENCE, signal)).resolves.toMatchObject({
        blocked: true,
      });
    });
  });

  describe('ReplySafety: a message as the organization’s settings screen it', () => {
    it('under the defaults: violence flagged but sent, self-harm a crisis response, figurative speech clean', async () => {
      const organizationId = await factory.organization();
      const screen = (message: string) => safety.screenMessage(organizationId, message, signal);

      expect(await screen(VIOLENCE)).toMatchObject({
        verdict: { flagged: true, categories: ['violence'], action: 'flagged' },
        blocked: false,
        crisis: false,
      });
      const crisis = await screen(SELF_HARM);
      expect(crisis).toMatchObject({
        verdict: { flagged: true, categories: ['self_harm'], action: 'crisis_response' },
        blocked: false,
        crisis: true,
      });
      expect(crisis.settings.crisisMessage).toBe(DEFAULT_CRISIS_MESSAGE);
      for (const message of [FIGURATIVE, CLEAN]) {
        expect({ message, ...(await screen(message)) }).toMatchObject({
          message,
          verdict: { flagged: false, categories: [], action: 'none' },
          blocked: false,
          crisis: false,
        });
      }
    });

    it('input block refuses violence; a blocked message that is also a crisis is still referred', async () => {
      const organizationId = await organizationWith({ input_moderation: 'block' });
      const screen = (message: string) => safety.screenMessage(organizationId, message, signal);

      expect(await screen(VIOLENCE)).toMatchObject({
        verdict: { flagged: true, categories: ['violence'], action: 'blocked' },
        blocked: true,
        crisis: false,
      });
      // The refusal answers, and ends with the crisis message (docs/safety.md).
      expect(await screen(BOTH)).toMatchObject({
        verdict: { flagged: true, categories: ['self_harm', 'violence'], action: 'blocked' },
        blocked: true,
        crisis: true,
      });
      expect(await screen(SELF_HARM)).toMatchObject({
        verdict: { action: 'crisis_response' },
        blocked: false,
        crisis: true,
      });
    });

    it('input off ignores violence but still reports self-harm; crisis off only flags it; all off classifies nothing', async () => {
      const inputOff = await organizationWith({ input_moderation: 'off' });
      expect(await safety.screenMessage(inputOff, BOTH, signal)).toMatchObject({
        verdict: { flagged: true, categories: ['self_harm'], action: 'crisis_response' },
        blocked: false,
        crisis: true,
      });
      expect(await safety.screenMessage(inputOff, VIOLENCE, signal)).toMatchObject({
        verdict: { flagged: false, categories: [], action: 'none' },
        blocked: false,
      });

      const crisisOff = await organizationWith({ crisis_response: 'off' });
      expect(await safety.screenMessage(crisisOff, SELF_HARM, signal)).toMatchObject({
        verdict: { flagged: true, categories: ['self_harm'], action: 'flagged' },
        crisis: false,
        blocked: false,
      });

      const allOff = await organizationWith({
        crisis_response: 'off',
        input_moderation: 'off',
        output_moderation: 'off',
      });
      const classify = jest.spyOn(classifier, 'classify');
      expect(await safety.screenMessage(allOff, BOTH, signal)).toMatchObject({
        verdict: { flagged: false, categories: [], action: 'none' },
        crisis: false,
        blocked: false,
      });
      expect(classify).not.toHaveBeenCalled();
    });

    it('a reply: output off reads nothing, flag records, block blocks; the exchange keeps the strongest action', async () => {
      const reply = 'Sure, here is how to make a pipe bomb.';
      const verdictUnder = async (mode: 'off' | 'flag' | 'block') => {
        const organizationId = await organizationWith({ output_moderation: mode });
        const message = await safety.screenMessage(organizationId, CLEAN, signal);
        const categories = await safety.screenReply(message.settings, reply, signal);
        const verdict = safety.replyVerdict(message, categories);
        return { categories, verdict, exchange: safety.exchangeVerdict(message.verdict, verdict) };
      };

      const classify = jest.spyOn(classifier, 'classify');
      const off = await verdictUnder('off');
      // The clean message is classified (crisis response and input flag are on); the reply is not.
      expect(classify.mock.calls.map(([text]) => text)).toEqual([CLEAN]);
      expect(off).toEqual({
        categories: [],
        verdict: { flagged: false, categories: [], action: 'none' },
        exchange: { flagged: false, categories: [], action: 'none' },
      });
      expect(await verdictUnder('flag')).toEqual({
        categories: ['violence'],
        verdict: { flagged: true, categories: ['violence'], action: 'flagged' },
        exchange: { flagged: true, categories: ['violence'], action: 'flagged' },
      });
      expect(await verdictUnder('block')).toEqual({
        categories: ['violence'],
        verdict: { flagged: true, categories: ['violence'], action: 'blocked' },
        exchange: { flagged: true, categories: ['violence'], action: 'blocked' },
      });

      // A flagged message and a blocked reply: the exchange holds both categories, and blocked.
      const organizationId = await factory.organization();
      const message = await safety.screenMessage(organizationId, VIOLENCE, signal);
      const replyVerdict = safety.replyVerdict(message, ['sexual_minors']);
      expect(safety.exchangeVerdict(message.verdict, replyVerdict)).toEqual({
        flagged: true,
        categories: ['sexual_minors', 'violence'],
        action: 'blocked',
      });
    });
  });
});
