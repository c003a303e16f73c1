import { Check, Column, Entity, ForeignKey, PrimaryColumn, UpdateDateColumn } from 'typeorm';

export const MODERATION_MODES = ['off', 'flag', 'block'] as const;
export type ModerationMode = (typeof MODERATION_MODES)[number];

/**
 * An organization's safety settings, once it changed one; an organization without a row has the
 * defaults of SafetySettingsService (crisis response on, input flagged, output blocked).
 */
@Entity('organization_safety_settings')
@Check('organization_safety_input_check', `input_moderation IN ('off', 'flag', 'block')`)
@Check('organization_safety_output_check', `output_moderation IN ('off', 'flag', 'block')`)
export class SafetySettings {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'organization_safety_settings_organization_id_fkey',
  })
  organizationId: string;

  @Column({ name: 'crisis_response', type: 'boolean' })
  crisisResponse: boolean;

  /** null: the default crisis message. */
  @Column({ name: 'crisis_message', type: 'text', nullable: true })
  crisisMessage: string | null;

  @Column({ name: 'input_moderation', type: 'text' })
  inputModeration: ModerationMode;

  @Column({ name: 'output_moderation', type: 'text' })
  outputModeration: ModerationMode;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
