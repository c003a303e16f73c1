/** The shapes of the API answers the console reads (docs/api.md); only the fields it shows. */

export type Role = 'owner' | 'admin' | 'member';
export const ROLES: Role[] = ['owner', 'admin', 'member'];
export type Scope = 'read' | 'read_write' | 'admin';
export const SCOPES: Scope[] = ['read', 'read_write', 'admin'];
export const MODERATION_MODES = ['off', 'flag', 'block'] as const;

export interface Login {
  access_token: string;
  expires_in: number;
}

export interface Me {
  id: string;
  email: string;
  name: string | null;
  email_verified: boolean;
}

export interface Organization {
  id: string;
  name: string;
  role: Role;
  created_at: string;
}

export interface Bucket {
  rps: number;
  burst: number;
}

export interface ApiKey {
  id: string;
  name: string;
  scopes: Scope[];
  prefix: string;
  last_four: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  rate_limit: Bucket | null;
  created_by: { type: 'user' | 'api_key'; id: string } | null;
}

export interface CreatedApiKey extends ApiKey {
  key: string | null;
}

export interface Personality {
  id: string;
  name: string;
}

export interface BreakdownItem {
  key: string | null;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
}

export interface Breakdown {
  month: string;
  group_by: string;
  data: BreakdownItem[];
  has_more: boolean;
}

export interface TokenUsage {
  month: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
}

export interface Limits {
  monthly_token_budget: number | null;
  end_user_daily_token_budget: number | null;
  end_user_rate_limit: Bucket | null;
}

export interface SafetySettings {
  crisis_response: 'on' | 'off';
  crisis_message: string;
  input_moderation: (typeof MODERATION_MODES)[number];
  output_moderation: (typeof MODERATION_MODES)[number];
}

export interface WebhookEndpoint {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  status: 'enabled' | 'disabled';
  disabled_reason?: string | null;
  created_at: string;
  secret?: string | null;
}

export interface WebhookDelivery {
  id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  status: 'pending' | 'succeeded' | 'failed';
  response_status: number | null;
  error: string | null;
  duration_ms: number | null;
  created_at: string;
  next_attempt_at: string | null;
}

export interface Member {
  user_id: string;
  email: string;
  name: string | null;
  role: Role;
  joined_at: string;
}

export interface Invitation {
  id: string;
  email: string;
  role: Role;
  status: string;
  expires_at: string;
  created_at: string;
}

export interface AuditEvent {
  id: string;
  action: string;
  actor: { type: string; id: string };
  target: { type: string; id: string };
  ip: string | null;
  request_id: string | null;
  created_at: string;
  details: Record<string, unknown>;
}

export interface EndUser {
  user_id: string;
  metadata: Record<string, unknown>;
  status: 'active' | 'deleting';
  created_at: string;
  updated_at: string;
}

export interface ToolCall {
  id: string;
  name: string;
  arguments: unknown;
  output?: unknown;
  execution?: string;
  duration_ms?: number | null;
  error?: string | null;
}

export interface Memory {
  id: string;
  personality_id: string;
  role: 'user' | 'personality';
  content: string;
  emotion: { name: string; intensity: number } | null;
  created_at: string;
  safety?: { flagged: boolean; categories: string[]; action: string } | null;
  tool_calls?: ToolCall[] | null;
}

export interface Fact {
  id: string;
  content: string;
  source: 'api' | 'engine';
  created_at: string;
}

export type { Page } from './api';
