import { Body, Controller, Module, Post } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { IsInt, IsString, MaxLength } from 'class-validator';
import { Public } from '../../src/common/auth/auth.decorators';
import { NoControlCharacters } from '../../src/common/validation/no-control-characters';

class ProbeDto {
  @IsString()
  @MaxLength(64)
  @NoControlCharacters()
  name: string;

  @IsInt()
  count: number;
}

/** Test-only routes for what no product route does on purpose: fail unexpectedly, echo input. */
@Public()
@Controller('v1/test-probe')
class ProbeController {
  constructor(private readonly dataSource: DataSource) {}

  @Post('echo')
  echo(@Body() body: ProbeDto) {
    return {
      name: body.name,
      count: body.count,
      prototype_untouched: Object.getPrototypeOf(body) === ProbeDto.prototype,
    };
  }

  /** A database error whose message and parameters quote the request's content. */
  @Post('query-fails')
  async queryFails(@Body() body: ProbeDto): Promise<unknown> {
    return this.dataSource.query('SELECT $1::uuid AS id', [body.name]);
  }

  @Post('boom')
  boom(): never {
    throw new Error('database password is hunter2 at SELECT * FROM secrets');
  }
}

@Module({ controllers: [ProbeController] })
export class ProbeModule {}
