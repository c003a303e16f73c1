import { MigrationInterface, QueryRunner } from 'typeorm';

/** Audited URLs rewritten a statement. */
const BATCH = 500;

/**
 * The audit events of webhook endpoints keep their URL's origin only, as the service now records
 * them (auditedUrl, src/webhooks/webhook-url.ts): the URLs recorded before may hold a receiver's
 * credentials in their path or query. Each is read by the WHATWG parser, as the service reads
 * them: the first releases stored and audited a URL as it was typed (`HTTPS://…`), which no
 * pattern over normalised URLs would match. A value the parser refuses, or whose origin is
 * opaque, is kept as `null`: nothing of it can be told apart from a secret. Row locks on those
 * events only; the other events are read, not written.
 *
 * down() cannot give back what was removed, and does nothing.
 */
export class AuditKeepsWebhookOrigins1795921400000 implements MigrationInterface {
  name = 'AuditKeepsWebhookOrigins1795921400000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    const audited = (await queryRunner.query(
      `SELECT id, "details" ->> 'url' AS url FROM "audit_events"
        WHERE "action" IN ('webhook_endpoint.created', 'webhook_endpoint.updated',
                           'webhook_endpoint.deleted')
          AND jsonb_typeof("details" -> 'url') = 'string'`,
    )) as Array<{ id: string; url: string }>;
    const rewritten = audited
      .map(({ id, url }) => ({ id, url, origin: originOf(url) }))
      .filter(({ url, origin }) => origin !== url);
    for (let start = 0; start < rewritten.length; start += BATCH) {
      const batch = rewritten.slice(start, start + BATCH);
      await queryRunner.query(
        `UPDATE "audit_events" e
            SET "details" = jsonb_set(e."details", '{url}', coalesce(to_jsonb(r.origin), 'null'))
           FROM unnest($1::uuid[], $2::text[]) AS r(id, origin)
          WHERE e.id = r.id`,
        [batch.map(({ id }) => id), batch.map(({ origin }) => origin)],
      );
    }
  }

  public async down(): Promise<void> {
    // The credentials removed are not kept anywhere.
  }
}

/** The URL's origin as auditedUrl gives it; null where there is none to give. */
function originOf(text: string): string | null {
  try {
    const { origin } = new URL(text);
    return origin === 'null' ? null : origin;
  } catch {
    return null;
  }
}
