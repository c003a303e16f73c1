import { Injectable } from '@nestjs/common';
import type { CallerContext } from '../common/auth/caller';
import { Caches } from '../common/cache/caches';
import type { SharedCache } from '../common/cache/shared-cache';
import { Clock } from '../common/time/clock';
import { OrganizationAccess } from '../organizations/organization-access';
import { stillManages } from '../users/manager-membership';
import type { LimitsDto, UpdateLimitsDto } from './dto/limits.dto';
import { type LimitsRow, LimitsRepository } from './limits.repository';
import { organizationPatchAudit } from '../audit/audit-event.step';

const NO_LIMITS: LimitsRow = {
  monthly_token_budget: null,
  end_user_daily_token_budget: null,
  end_user_rps: null,
  end_user_burst: null,
};

/**
 * How long this instance keeps an organization's limits for replies; a PATCH drops them here at
 * once and, through Redis, on every instance before it answers (without Redis: within this long).
 */
export const LIMITS_CACHE_MS = 5_000;

/** The limits as replies and the rate limiter apply them: numbers, null for none. */
export interface AppliedLimits {
  monthlyTokenBudget: number | null;
  endUserDailyTokenBudget: number | null;
  endUserBucket: { rps: number; burst: number } | null;
}

export const NONE: AppliedLimits = {
  monthlyTokenBudget: null,
  endUserDailyTokenBudget: null,
  endUserBucket: null,
};

/** An organization's spend limits (contract §23): read by members, changed by admins. */
@Injectable()
export class LimitsService {
  private readonly cache: SharedCache<AppliedLimits>;

  constructor(
    private readonly limits: LimitsRepository,
    private readonly access: OrganizationAccess,
    private readonly clock: Clock,
    caches: Caches,
  ) {
    this.cache = caches.shared({
      channel: 'spend:limits-changed',
      ttlMs: LIMITS_CACHE_MS,
      maxEntries: 100_000,
    });
  }

  async get(caller: CallerContext, organizationId: string): Promise<LimitsDto> {
    await this.access.assert(caller, organizationId, 'read');
    return toResponse((await this.limits.find(organizationId)) ?? NO_LIMITS);
  }

  async update(
    caller: CallerContext,
    organizationId: string,
    patch: UpdateLimitsDto,
  ): Promise<LimitsDto> {
    await this.access.assert(caller, organizationId, 'admin');
    const at = this.clock.now();
    const bucket = patch.end_user_rate_limit;
    const written = await this.limits.patch(
      organizationId,
      {
        monthly_token_budget:
          patch.monthly_token_budget === undefined
            ? undefined
            : toBigint(patch.monthly_token_budget),
        end_user_daily_token_budget:
          patch.end_user_daily_token_budget === undefined
            ? undefined
            : toBigint(patch.end_user_daily_token_budget),
        // The bucket's two columns are given together, or not at all.
        end_user_rps: bucket === undefined ? undefined : (bucket?.rps ?? null),
        end_user_burst: bucket === undefined ? undefined : (bucket?.burst ?? null),
      },
      NO_LIMITS,
      at,
      organizationPatchAudit(caller, { organizationId, action: 'limits.updated', at }, patch),
      stillManages(caller, organizationId),
    );
    if (!written) throw await this.access.writeRefused(caller);
    // Before answering, every subscribed instance has dropped its copy: the next reply anywhere
    // is judged by the new limits (a budget lowered below what is spent refuses it).
    await this.cache.invalidate(organizationId, { confirmed: true });
    return toResponse(written);
  }

  /** The limits a reply (or the rate limiter) of the organization applies, cached here. */
  async forOrganization(organizationId: string): Promise<AppliedLimits> {
    return this.cache.get(organizationId, async () => {
      const row = await this.limits.find(organizationId);
      return row ? toApplied(row) : NONE;
    });
  }

  /** Without a read when the organization's limits are cached (the rate limiter's fast path). */
  cached(organizationId: string): AppliedLimits | undefined {
    return this.cache.peek(organizationId);
  }
}

const toBigint = (value: number | null): string | null => (value === null ? null : String(value));

function toApplied(row: LimitsRow): AppliedLimits {
  return {
    monthlyTokenBudget: row.monthly_token_budget === null ? null : Number(row.monthly_token_budget),
    endUserDailyTokenBudget:
      row.end_user_daily_token_budget === null ? null : Number(row.end_user_daily_token_budget),
    endUserBucket:
      row.end_user_rps === null || row.end_user_burst === null
        ? null
        : { rps: row.end_user_rps, burst: row.end_user_burst },
  };
}

function toResponse(row: LimitsRow): LimitsDto {
  const applied = toApplied(row);
  return {
    monthly_token_budget: applied.monthlyTokenBudget,
    end_user_daily_token_budget: applied.endUserDailyTokenBudget,
    end_user_rate_limit: applied.endUserBucket,
  };
}
