/**
 * Bodies PATCH /v1/organizations/{id}/limits refuses with validation_failed (contract §23):
 * negative, zero, fractional, absurd and mistyped values, and unknown fields.
 */
export const INVALID_LIMITS_BODIES: ReadonlyArray<Record<string, unknown>> = [
  { monthly_token_budget: 0 },
  { monthly_token_budget: -1 },
  { monthly_token_budget: 1.5 },
  { monthly_token_budget: 2 ** 53 },
  { monthly_token_budget: 1e300 },
  { monthly_token_budget: '1000' },
  { monthly_token_budget: true },
  { monthly_token_budget: [1] },
  { end_user_daily_token_budget: -5 },
  { end_user_daily_token_budget: 2 ** 53 + 2 },
  { end_user_rate_limit: { rps: 0, burst: 1 } },
  { end_user_rate_limit: { rps: -1, burst: 1 } },
  { end_user_rate_limit: { rps: 1e300, burst: 1 } },
  { end_user_rate_limit: { rps: '1', burst: 1 } },
  { end_user_rate_limit: { rps: 1, burst: 0 } },
  { end_user_rate_limit: { rps: 1, burst: 1.5 } },
  { end_user_rate_limit: { rps: 1, burst: 2 ** 53 } },
  { end_user_rate_limit: { rps: 1 } },
  { end_user_rate_limit: { rps: 1, burst: 1, extra: 1 } },
  { end_user_rate_limit: 5 },
  { end_user_rate_limit: [] },
  { unknown_field: 1 },
];
