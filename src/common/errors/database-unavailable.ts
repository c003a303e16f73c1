/** Errors of Node's sockets that mean the database could not be reached or the link broke. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** What pg and pg-pool say, with no code, when a session could not be had or was lost. */
const LOST_SESSION_MESSAGES = [
  'timeout exceeded when trying to connect',
  'Connection terminated unexpectedly',
  'Connection terminated due to connection timeout',
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  // pg's query_timeout: no answer from a server or path gone silent (readTimeoutFor).
  'Query read timeout',
  // A session ended (DatabaseClient) that a statement still reached.
  'Client was closed and is not queryable',
];

/**
 * What the server answers a new session that it will not open: the database is gone or renamed
 * (3D000), the credentials were refused (28000, 28P01: a rotated password), or it has no room
 * (53300). None is a statement's own failure: found by review, a dropped database had each
 * 500 ms poller write a stack trace, where an outage is reported once a minute.
 */
const REFUSED_SESSION_CODES = new Set(['3D000', '28000', '28P01', '53300']);

/**
 * True when a request failed because the database was out of reach, not because of what it
 * asked: no session within the pool's connect timeout, a session the network or the server ended
 * (SQLSTATE class 08; 57P01 to 57P03: shut down, crashed, not accepting connections), a session
 * refused (REFUSED_SESSION_CODES), a socket refused or reset. Such a request may well succeed in
 * a moment (a failover, a restart): 503 with Retry-After, which clients retry, where 500 said the
 * service had failed (found by review).
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message, severity, driverError } = error as {
    code?: unknown;
    message?: unknown;
    severity?: unknown;
    driverError?: { code?: unknown; severity?: unknown };
  };
  const sqlState = typeof code === 'string' ? code : driverError?.code;
  if (typeof sqlState === 'string') {
    // 08P01 (protocol_violation) as an ERROR is the client's own mistake, the same on every try;
    // as a FATAL that ends the session it is a pooler's outage (PgBouncer's "cannot connect to
    // server", "query_wait_timeout"...: review of the change).
    if (sqlState === '08P01') return (severity ?? driverError?.severity) === 'FATAL';
    if (sqlState.startsWith('08')) return true;
    if (/^57P0[1-3]$/.test(sqlState)) return true;
    if (REFUSED_SESSION_CODES.has(sqlState)) return true;
    if (SOCKET_CODES.has(sqlState)) return true;
  }
  return typeof message === 'string' && LOST_SESSION_MESSAGES.includes(message);
}
