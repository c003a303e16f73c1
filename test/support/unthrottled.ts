/**
 * Rate limits out of the way, for specs that fire many auth requests on purpose (lockout, races):
 * they test the lockout and the races, not the buckets.
 */
export const UNTHROTTLED = {
  RATE_LIMIT_AUTH_RPS: '100000',
  RATE_LIMIT_AUTH_BURST: '100000',
  RATE_LIMIT_IP_RPS: '100000',
  RATE_LIMIT_IP_BURST: '100000',
  RATE_LIMIT_ORG_RPS: '100000',
  RATE_LIMIT_ORG_BURST: '100000',
};
