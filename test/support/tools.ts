import type {
  EngineReply,
  EngineToolCall,
  TokenUsage,
} from '../../src/respond/engine/response-engine';
import type { ToolDefinition } from '../../src/tools/tool-definitions';
import { Webhook } from 'standardwebhooks';
import type { HttpTarget } from './test-app';
import type { ReceivedWebhook } from './webhook-receiver';

/** A client tool (contract §26) the local engine calls when a message holds `lookup_order({...})`. */
export const lookupOrderTool: ToolDefinition = {
  name: 'lookup_order',
  description: "Looks up one of the user's orders",
  parameters: {
    type: 'object',
    properties: { order_id: { type: 'string' } },
    required: ['order_id'],
    additionalProperties: false,
  },
  execution: 'client',
};

/** A webhook endpoint of the caller's organization (a webhook tool's target), with its secret. */
export async function createWebhookEndpoint(
  t: HttpTarget,
  auth: string,
  url: string,
): Promise<{ id: string; secret: string }> {
  const response = await t
    .http()
    .post('/v1/webhook-endpoints')
    .set('Authorization', auth)
    .send({ url, events: ['end_user.deleted'] });
  expect({ status: response.status, body: response.body }).toMatchObject({ status: 201 });
  return { id: response.body.id as string, secret: response.body.secret as string };
}

/** The event a received webhook carries, once its Standard Webhooks signature is verified. */
export function verifiedEvent(hook: ReceivedWebhook, secret: string): unknown {
  return new Webhook(secret).verify(hook.body, {
    'webhook-id': String(hook.headers['webhook-id']),
    'webhook-timestamp': String(hook.headers['webhook-timestamp']),
    'webhook-signature': String(hook.headers['webhook-signature']),
  });
}

/** An engine's reply: text, or (with `toolCalls`) calls of tools before it answers. */
export function engineReply(
  text: string,
  toolCalls?: EngineToolCall[],
  usage: TokenUsage | null = null,
): EngineReply {
  const neutral = { name: 'neutral', intensity: 0 };
  return {
    text,
    emotion: neutral,
    detected: neutral,
    usage,
    model: 'model-a',
    facts: [],
    toolCalls,
  };
}
