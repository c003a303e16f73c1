import { ApiProperty } from '@nestjs/swagger';
import { IsEmail, IsString, MaxLength, MinLength } from 'class-validator';
import { PASSWORD_MAX, PASSWORD_MIN } from './signup.dto';

export class LoginDto {
  @ApiProperty({ example: 'ada@example.com', maxLength: 254 })
  @IsEmail({}, { message: 'email must be an e-mail address' })
  @MaxLength(254)
  email: string;

  /** Any length up to the maximum: a too-short password is simply a wrong one (and counted). */
  @ApiProperty({ maxLength: PASSWORD_MAX })
  @IsString()
  @MinLength(1)
  @MaxLength(PASSWORD_MAX)
  password: string;
}

export class ForgotPasswordDto {
  @ApiProperty({ example: 'ada@example.com', maxLength: 254 })
  @IsEmail({}, { message: 'email must be an e-mail address' })
  @MaxLength(254)
  email: string;
}

export class ForgotPasswordResponseDto {
  @ApiProperty({
    enum: ['reset_requested'],
    description: 'The same answer whether or not the address has an account',
  })
  status: 'reset_requested';
}

export class ResetPasswordDto {
  @ApiProperty({ description: 'The token from the link in the e-mail', maxLength: 512 })
  @IsString()
  @MinLength(1)
  @MaxLength(512)
  token: string;

  @ApiProperty({
    minLength: PASSWORD_MIN,
    maxLength: PASSWORD_MAX,
    description: 'Used exactly as sent, never truncated',
  })
  @IsString()
  @MinLength(PASSWORD_MIN)
  @MaxLength(PASSWORD_MAX)
  new_password: string;
}

export class ResetPasswordResponseDto {
  @ApiProperty({ enum: ['password_reset'] })
  status: 'password_reset';
}
