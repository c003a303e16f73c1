import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  /** String-valued attributes only. */
  attributes: Record<string, string>;
  serviceName: string;
}

/**
 * A local OTLP/HTTP trace receiver (POST /v1/traces), as a collector or Jaeger would expose on
 * 4318: it accepts both encodings the exporter can send, protobuf (its default) and JSON.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly contentTypes = new Set<string>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<OtlpReceiver> {
    const server = createServer();
    const receiver = new OtlpReceiver(server);
    server.on('request', (request, response) => {
      void readBody(request).then(
        (body) => {
          if (request.method !== 'POST' || request.url !== '/v1/traces') {
            response.writeHead(404).end();
            return;
          }
          const type = (request.headers['content-type'] ?? '').split(';')[0];
          receiver.contentTypes.add(type);
          if (type === 'application/json') {
            receiver.spans.push(...spansFromJson(JSON.parse(body.toString('utf8'))));
            response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
          } else if (type === 'application/x-protobuf') {
            receiver.spans.push(...spansFromProtobuf(body));
            response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
          } else {
            response.writeHead(415).end();
          }
        },
        () => response.writeHead(400).end(),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  return request.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
}

interface JsonKeyValue {
  key: string;
  value: { stringValue?: string };
}

interface JsonExport {
  resourceSpans?: Array<{
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: JsonKeyValue[];
      }>;
    }>;
  }>;
}

function stringAttributes(list: JsonKeyValue[] = []): Record<string, string> {
  const attributes: Record<string, string> = {};
  for (const { key, value } of list)
    if (value.stringValue !== undefined) attributes[key] = value.stringValue;
  return attributes;
}

function spansFromJson(body: JsonExport): ReceivedSpan[] {
  return (body.resourceSpans ?? []).flatMap((resourceSpans) => {
    const serviceName = stringAttributes(resourceSpans.resource?.attributes)['service.name'] ?? '';
    return (resourceSpans.scopeSpans ?? []).flatMap((scope) =>
      (scope.spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind,
        attributes: stringAttributes(span.attributes),
        serviceName,
      })),
    );
  });
}

/** Field number → the raw values of that field (varints as numbers, the rest as bytes). */
type Fields = Map<number, Array<Buffer | number>>;

/** Just enough of the protobuf wire format for ExportTraceServiceRequest. */
function decode(buffer: Buffer): Fields {
  const fields: Fields = new Map();
  let offset = 0;
  const varint = (): number => {
    let result = 0;
    let shift = 0;
    for (;;) {
      const byte = buffer[offset++];
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
      shift += 7;
    }
  };
  while (offset < buffer.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    let value: Buffer | number;
    switch (tag & 7) {
      case 0:
        value = varint();
        break;
      case 1:
        value = buffer.subarray(offset, offset + 8);
        offset += 8;
        break;
      case 2: {
        const length = varint();
        value = buffer.subarray(offset, offset + length);
        offset += length;
        break;
      }
      case 5:
        value = buffer.subarray(offset, offset + 4);
        offset += 4;
        break;
      default:
        throw new Error(`unsupported wire type ${tag & 7}`);
    }
    fields.set(field, [...(fields.get(field) ?? []), value]);
  }
  return fields;
}

const messages = (fields: Fields, field: number) =>
  (fields.get(field) ?? []).map((value) => decode(value as Buffer));
const bytes = (fields: Fields, field: number) =>
  (fields.get(field)?.[0] as Buffer | undefined) ?? Buffer.alloc(0);

function protobufAttributes(list: Fields[]): Record<string, string> {
  const attributes: Record<string, string> = {};
  for (const keyValue of list) {
    const value = messages(keyValue, 2)[0];
    const text = value?.get(1)?.[0];
    if (text instanceof Buffer)
      attributes[bytes(keyValue, 1).toString('utf8')] = text.toString('utf8');
  }
  return attributes;
}

function spansFromProtobuf(body: Buffer): ReceivedSpan[] {
  return messages(decode(body), 1).flatMap((resourceSpans) => {
    const resource = messages(resourceSpans, 1)[0];
    const serviceName = resource
      ? (protobufAttributes(messages(resource, 1))['service.name'] ?? '')
      : '';
    return messages(resourceSpans, 2).flatMap((scopeSpans) =>
      messages(scopeSpans, 2).map((span) => ({
        traceId: bytes(span, 1).toString('hex'),
        spanId: bytes(span, 2).toString('hex'),
        parentSpanId: bytes(span, 4).toString('hex'),
        name: bytes(span, 5).toString('utf8'),
        kind: (span.get(6)?.[0] as number | undefined) ?? 0,
        attributes: protobufAttributes(messages(span, 9)),
        serviceName,
      })),
    );
  });
}
