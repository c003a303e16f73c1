/**
 * The console's only way to the service: the public API, same origin, with the signed-in user's
 * access token. The token lives in this module's memory and nowhere else (no storage, no cookie):
 * a reload or a new tab signs in again (docs/console.md).
 */

/** An error answer of the API (its envelope), or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string | null,
    readonly details: unknown = undefined,
  ) {
    super(message);
  }
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

interface Credentials {
  token: string;
  /** When the token stops working (ms since the epoch). */
  expiresAt: number;
}

let credentials: Credentials | null = null;
let organizationId: string | null = null;
let onSignedOut: ((reason: string) => void) | null = null;
let onOrganizationLost: ((organizationId: string) => void) | null = null;

export function setCredentials(token: string, expiresInSeconds: number): void {
  credentials = { token, expiresAt: Date.now() + expiresInSeconds * 1000 };
}

export function clearCredentials(): void {
  credentials = null;
  organizationId = null;
}

export function tokenExpiresAt(): number | null {
  return credentials?.expiresAt ?? null;
}

/** The organization every organization-scoped call acts in (X-Organization-Id). */
export function currentOrganization(): string | null {
  return organizationId;
}

/** Sets the organization every organization-scoped call acts in from now on. */
export function setOrganization(id: string | null): void {
  organizationId = id;
}

/** Called when the API no longer accepts the token (expired, or the user's tokens were ended). */
export function whenSignedOut(listener: (reason: string) => void): void {
  onSignedOut = listener;
}

/**
 * Called with the organization a call was made in when the API answers it 403 not_a_member: the
 * user left it or was removed from it since it was picked.
 */
export function whenOrganizationLost(listener: (organizationId: string) => void): void {
  onOrganizationLost = listener;
}

type Query = Record<string, string | number | boolean | undefined | null>;

export interface RequestOptions {
  body?: unknown;
  query?: Query;
  /** Answer the raw Response (a download); errors still throw. */
  raw?: boolean;
  /** Without the token (sign-in, reset, verification): a 401 then is an answer, not a sign-out. */
  anonymous?: boolean;
  /**
   * About the user, not the organization (their organizations, profile, invitations): sent
   * without X-Organization-Id, so it still answers after they left the current one.
   */
  asUser?: boolean;
}

export function pathWithQuery(path: string, query?: Query): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  }
  const text = search.toString();
  return text ? `${path}?${text}` : path;
}

/** `/v1/end-users/{user_id}`: every user-supplied path segment goes through here. */
export const segment = (value: string) => encodeURIComponent(value);

export async function api<T>(
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const signedIn = !options.anonymous && credentials !== null;
  const sentIn = signedIn && !options.asUser ? organizationId : null;
  // Without the header the API acts in the user's first organization (§3): a call about an
  // organization once none is picked (after a Leave, or a removal seen by another call) would
  // read or change another one than the page shows (found by review).
  if (signedIn && !options.asUser && sentIn === null) {
    throw new ApiError(0, 'no_organization', 'Pick an organization first.', null);
  }
  if (signedIn) headers.authorization = `Bearer ${credentials!.token}`;
  if (sentIn !== null) headers['x-organization-id'] = sentIn;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(pathWithQuery(path, options.query), {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'network_error', 'The service could not be reached. Try again.', null);
  }
  if (!response.ok) {
    const error = await errorOf(response);
    if (response.status === 401 && signedIn) {
      clearCredentials();
      onSignedOut?.('Your session has ended. Sign in again.');
    } else if (response.status === 403 && error.code === 'not_a_member' && sentIn !== null) {
      onOrganizationLost?.(sentIn);
    }
    throw error;
  }
  if (options.raw) return response as T;
  if (
    response.status === 204 ||
    (response.status === 202 && response.headers.get('content-length') === '0')
  ) {
    return undefined as T;
  }
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

async function errorOf(response: Response): Promise<ApiError> {
  const requestId = response.headers.get('x-request-id');
  try {
    const body = (await response.json()) as {
      error?: { code?: string; message?: string; request_id?: string; details?: unknown };
    };
    if (body.error?.message) {
      return new ApiError(
        response.status,
        body.error.code ?? 'error',
        body.error.message,
        body.error.request_id ?? requestId,
        body.error.details,
      );
    }
  } catch {
    // Not the envelope: said below.
  }
  return new ApiError(
    response.status,
    'error',
    `The service answered ${response.status} ${response.statusText}`.trim(),
    requestId,
  );
}

/** Every item of a list, following `starting_after` (bounded: the console lists what it shows). */
export async function all<T extends { id: string }>(
  path: string,
  query: Query = {},
  pages = 10,
  options: Pick<RequestOptions, 'asUser'> = {},
): Promise<T[]> {
  const items: T[] = [];
  let after: string | undefined;
  for (let i = 0; i < pages; i++) {
    const page = await api<Page<T>>('GET', path, {
      ...options,
      query: { ...query, limit: 100, starting_after: after },
    });
    items.push(...page.data);
    if (!page.has_more || page.data.length === 0) break;
    after = page.data[page.data.length - 1].id;
  }
  return items;
}
