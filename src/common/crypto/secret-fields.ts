/**
 * Field names that hold a credential, a secret or a token, wherever they appear: log lines redact
 * them and webhook event data refuses them. One list, so a new secret is named once.
 */
export const SECRET_FIELD_NAMES: readonly string[] = [
  'password',
  'new_password',
  'password_hash',
  'token',
  'token_hash',
  'access_token',
  'refresh_token',
  'id_token',
  'key',
  'key_hash',
  'api_key',
  'secret',
  'client_secret',
  'authorization',
];
