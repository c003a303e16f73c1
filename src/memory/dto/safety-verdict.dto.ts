import { ApiProperty } from '@nestjs/swagger';
import {
  SAFETY_ACTIONS,
  SAFETY_CATEGORIES,
  type SafetyAction,
  type SafetyCategory,
} from '../../safety/safety-categories';

/** What the safety checks found in a message, a reply or an exchange, and what they did. */
export class SafetyVerdictDto {
  @ApiProperty({ description: 'Something was detected' })
  flagged: boolean;

  @ApiProperty({ enum: SAFETY_CATEGORIES, isArray: true })
  categories: SafetyCategory[];

  @ApiProperty({
    enum: SAFETY_ACTIONS,
    description:
      '`crisis_response`: the reply ends with the crisis message; `blocked`: a refusal replaced the reply; `flagged`: recorded, nothing changed',
  })
  action: SafetyAction;
}
