import { Injectable } from '@nestjs/common';
import type { CallerContext } from '../common/auth/caller';
import { Caches } from '../common/cache/caches';
import type { SharedCache } from '../common/cache/shared-cache';
import { Clock } from '../common/time/clock';
import { OrganizationAccess } from '../organizations/organization-access';
import { stillManages } from '../users/manager-membership';
import type { SafetySettingsDto, UpdateSafetySettingsDto } from './dto/safety-settings.dto';
import { type SafetySettingsRow, SafetySettingsRepository } from './safety-settings.repository';
import { organizationPatchAudit } from '../audit/audit-event.step';

/**
 * Shown after a crisis reply unless the organization wrote its own: where to find help now, in
 * the countries whose languages the local classifier reads, and everywhere else.
 */
export const DEFAULT_CRISIS_MESSAGE = [
  'If you are thinking about suicide or about hurting yourself, please reach out now — you do not',
  'have to go through this alone. In the US, call or text 988 (Suicide & Crisis Lifeline). In the',
  'UK and Ireland, call Samaritans on 116 123. In Germany, call the TelefonSeelsorge on',
  '0800 111 0 111; in France, 3114; in Spain, 024. In an emergency, call 911 (US), 999 (UK) or',
  '112 (Europe). Elsewhere, findahelpline.com lists free, confidential lines in your country.',
].join(' ');

/** Until an organization changes them (contract §22). */
const DEFAULTS: SafetySettingsRow = {
  crisis_response: true,
  crisis_message: null,
  input_moderation: 'flag',
  output_moderation: 'block',
};

/**
 * How long this instance keeps an organization's settings for replies; a PATCH drops them here
 * at once and on every instance through Redis (without Redis, within this long).
 */
const SETTINGS_CACHE_MS = 5_000;

/** The organization's settings as replies apply them. */
export interface AppliedSafetySettings {
  crisisResponse: boolean;
  crisisMessage: string;
  inputModeration: SafetySettingsRow['input_moderation'];
  outputModeration: SafetySettingsRow['output_moderation'];
}

@Injectable()
export class SafetySettingsService {
  private readonly cache: SharedCache<SafetySettingsRow>;

  constructor(
    private readonly settings: SafetySettingsRepository,
    private readonly access: OrganizationAccess,
    private readonly clock: Clock,
    caches: Caches,
  ) {
    this.cache = caches.shared({ channel: 'safety:changed', ttlMs: SETTINGS_CACHE_MS });
  }

  async get(caller: CallerContext, organizationId: string): Promise<SafetySettingsDto> {
    await this.access.assert(caller, organizationId, 'read');
    return toResponse(await this.stored(organizationId));
  }

  async update(
    caller: CallerContext,
    organizationId: string,
    patch: UpdateSafetySettingsDto,
  ): Promise<SafetySettingsDto> {
    await this.access.assert(caller, organizationId, 'admin');
    const at = this.clock.now();
    const written = await this.settings.patch(
      organizationId,
      {
        crisis_response:
          patch.crisis_response === undefined ? undefined : patch.crisis_response === 'on',
        crisis_message: patch.crisis_message,
        input_moderation: patch.input_moderation,
        output_moderation: patch.output_moderation,
      },
      DEFAULTS,
      at,
      organizationPatchAudit(
        caller,
        { organizationId, action: 'safety_settings.updated', at },
        patch,
      ),
      stillManages(caller, organizationId),
    );
    if (!written) throw await this.access.writeRefused(caller);
    await this.cache.invalidate(organizationId);
    return toResponse(written);
  }

  /** The settings a reply of the organization applies, from this instance's cache if there. */
  async forReply(organizationId: string): Promise<AppliedSafetySettings> {
    const row = await this.stored(organizationId);
    return {
      crisisResponse: row.crisis_response,
      crisisMessage: row.crisis_message ?? DEFAULT_CRISIS_MESSAGE,
      inputModeration: row.input_moderation,
      outputModeration: row.output_moderation,
    };
  }

  private stored(organizationId: string): Promise<SafetySettingsRow> {
    return this.cache.get(
      organizationId,
      async () => (await this.settings.find(organizationId)) ?? DEFAULTS,
    );
  }
}

function toResponse(row: SafetySettingsRow): SafetySettingsDto {
  return {
    crisis_response: row.crisis_response ? 'on' : 'off',
    crisis_message: row.crisis_message ?? DEFAULT_CRISIS_MESSAGE,
    input_moderation: row.input_moderation,
    output_moderation: row.output_moderation,
  };
}
