/**
 * What an erased end user's id becomes in the audit events that named them. A client may name an
 * end user so too: a read of one end user's events leaves this id out (they are every erased
 * end user's).
 */
export const ERASED_TARGET_ID = '[erased]';
