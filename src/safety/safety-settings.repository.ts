import { Injectable } from '@nestjs/common';
import type { OrganizationPatchAudit } from '../audit/audit-event.step';
import { Database } from '../database/database';
import { Cte, type Sql, sql, withEntries } from '../database/sql';
import { patchedColumns } from '../database/patch';
import { Columns, type RowOf } from '../database/columns';
import type { SafetySettings } from './entities/safety-settings.entity';

const SETTINGS = Columns.rowOf<SafetySettings>()(
  'crisisResponse',
  'crisisMessage',
  'inputModeration',
  'outputModeration',
);

export type SafetySettingsRow = RowOf<typeof SETTINGS>;

/** The SQL of organization_safety_settings. */
@Injectable()
export class SafetySettingsRepository {
  constructor(private readonly database: Database) {}

  find(organizationId: string): Promise<SafetySettingsRow | undefined> {
    return this.database.row(
      SETTINGS.query`SELECT ${SETTINGS}
            FROM organization_safety_settings WHERE organization_id = ${organizationId}`,
      { prepared: true },
    );
  }

  /**
   * The fields `patch` gives, written onto the settings as they are when the row is locked (or
   * onto `defaults` for an organization without a row), in one statement: concurrent PATCHes of
   * different fields all land; `audit` records the change in the same statement. Answers the
   * settings as written.
   */
  async patch(
    organizationId: string,
    patch: Partial<SafetySettingsRow>,
    defaults: SafetySettingsRow,
    at: Date,
    audit: OrganizationPatchAudit,
    /** True while the caller may still write (users/manager-membership.ts, stillManages). */
    managing: Sql,
  ): Promise<SafetySettingsRow | undefined> {
    const value = <Field extends keyof SafetySettingsRow>(field: Field) =>
      patch[field] === undefined ? defaults[field] : patch[field];
    const written = new Cte(
      'safety_settings_written',
      sql`INSERT INTO organization_safety_settings AS s
            (organization_id, crisis_response, crisis_message, input_moderation,
             output_moderation, updated_at)
          SELECT ${organizationId}::uuid, ${value('crisis_response')}::boolean,
                 ${value('crisis_message')}::text, ${value('input_moderation')}::text,
                 ${value('output_moderation')}::text, ${at}::timestamptz
           WHERE ${managing}
          ON CONFLICT (organization_id) DO UPDATE SET
            ${patchedColumns('s', {
              crisis_response: patch.crisis_response,
              crisis_message: patch.crisis_message,
              input_moderation: patch.input_moderation,
              output_moderation: patch.output_moderation,
            })},
            updated_at = excluded.updated_at
          RETURNING organization_id, ${SETTINGS}`,
      ['organization_id'],
    );
    return this.database.row(
      withEntries(
        [written, ...audit(written)],
        SETTINGS.query`SELECT ${SETTINGS} FROM safety_settings_written`,
      ),
    );
  }
}
