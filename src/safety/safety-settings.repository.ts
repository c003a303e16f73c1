import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { sql } from '../database/sql';
import type { Row } from '../database/row';
import type { SafetySettings } from './entities/safety-settings.entity';

export type SafetySettingsRow = Row<
  SafetySettings,
  'crisisResponse' | 'crisisMessage' | 'inputModeration' | 'outputModeration'
>;

/** The SQL of organization_safety_settings. */
@Injectable()
export class SafetySettingsRepository {
  constructor(private readonly database: Database) {}

  find(organizationId: string): Promise<SafetySettingsRow | undefined> {
    return this.database.row<SafetySettingsRow>(
      sql`SELECT crisis_response, crisis_message, input_moderation, output_moderation
            FROM organization_safety_settings WHERE organization_id = ${organizationId}`,
      { prepared: true },
    );
  }

  /** Writes the organization's whole settings (the PATCH merged onto the current ones). */
  async upsert(organizationId: string, settings: SafetySettingsRow, at: Date): Promise<void> {
    await this.database.rows(
      sql`INSERT INTO organization_safety_settings
            (organization_id, crisis_response, crisis_message, input_moderation,
             output_moderation, updated_at)
          VALUES (${organizationId}, ${settings.crisis_response}, ${settings.crisis_message},
                  ${settings.input_moderation}, ${settings.output_moderation}, ${at})
          ON CONFLICT (organization_id) DO UPDATE SET
            crisis_response = excluded.crisis_response, crisis_message = excluded.crisis_message,
            input_moderation = excluded.input_moderation,
            output_moderation = excluded.output_moderation, updated_at = excluded.updated_at`,
    );
  }
}
