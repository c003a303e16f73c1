import { ApiProperty } from '@nestjs/swagger';
import { IsString, MaxLength, MinLength } from 'class-validator';

export class VerifyEmailDto {
  @ApiProperty({ description: 'The token from the link mailed at sign-up', maxLength: 512 })
  @IsString()
  @MinLength(1)
  @MaxLength(512)
  token: string;
}

export class ResendVerificationResponseDto {
  @ApiProperty({
    enum: ['verification_requested'],
    description:
      'A new link is mailed unless the address is verified already (or 5 went out this hour)',
  })
  status: 'verification_requested';
}
