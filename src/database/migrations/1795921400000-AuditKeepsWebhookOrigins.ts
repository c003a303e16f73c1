import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The audit events of webhook endpoints keep their URL's origin only, as the service now records
 * them (auditedUrl, src/webhooks/webhook-url.ts): the URLs recorded before may hold a receiver's
 * credentials in their path or query. The URLs are WHATWG serialisations, so the origin is the
 * scheme and what follows `//` up to the first `/`, `?` or `#` (a `user:password@`, which the
 * service has refused since webhooks came, would be dropped too). Row locks on those events only; the other events are read, not written.
 *
 * down() cannot give back what was removed, and does nothing.
 */
export class AuditKeepsWebhookOrigins1795921400000 implements MigrationInterface {
  name = 'AuditKeepsWebhookOrigins1795921400000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `UPDATE "audit_events"
          SET "details" = jsonb_set("details", '{url}', to_jsonb(regexp_replace(
                "details" ->> 'url', '^([a-z][a-z0-9+.-]*://)(?:[^@/?#]*@)?([^/?#]*).*$', '\\1\\2')))
        WHERE "action" IN ('webhook_endpoint.created', 'webhook_endpoint.updated',
                           'webhook_endpoint.deleted')
          AND jsonb_typeof("details" -> 'url') = 'string'`,
    );
  }

  public async down(): Promise<void> {
    // The credentials removed are not kept anywhere.
  }
}
