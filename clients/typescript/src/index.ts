export {
  PersonalityApi,
  type CallOptions,
  type ListItem,
  type ListPath,
  type PageParams,
  type PersonalityApiOptions,
  type RespondAnswer,
  type RespondBody,
  type RespondStreamEvent,
} from './client';
export { PersonalityApiError, type ErrorBody } from './errors';
export type { components, operations, paths } from './generated/openapi';
export type { Fetch } from './retry';
export {
  verifyWebhook,
  WebhookVerificationError,
  type WebhookEvent,
  type WebhookEventType,
  type WebhookHeaders,
} from './webhooks';

import type { components } from './generated/openapi';
/** The named schemas of the API document, e.g. `Schemas['EndUserDto']`. */
export type Schemas = components['schemas'];
