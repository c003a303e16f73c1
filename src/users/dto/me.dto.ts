import { ApiProperty } from '@nestjs/swagger';
import type { User } from '../entities/user.entity';

/** The logged-in user, as GET /v1/me shows them. */
export class MeDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'ada@example.com' })
  email: string;

  @ApiProperty({ nullable: true, type: String })
  name: string | null;

  @ApiProperty({
    description:
      'Whether the address was verified with the link mailed at sign-up (POST /v1/auth/verify-email); inviting needs it',
  })
  email_verified: boolean;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;
}

export function toMeResponse(
  user: Pick<User, 'id' | 'email' | 'name' | 'emailVerifiedAt' | 'createdAt'>,
): MeDto {
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    email_verified: user.emailVerifiedAt !== null,
    created_at: user.createdAt.toISOString(),
  };
}
