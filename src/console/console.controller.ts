import { Controller, Get, Param, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { Public } from '../common/auth/auth.decorators';
import { AppError } from '../common/errors/app-error';
import { CONSOLE_PAGE, ConsoleFiles } from './console-files';

/**
 * The web console (contract §28): its page at /console and every path under it (the script
 * routes on the path, so a reload or a mail link lands on its page), its assets under
 * /console/assets/. Public: the files hold no data; the console signs in through the API.
 */
@Public()
@ApiExcludeController()
@Controller('console')
export class ConsoleController {
  constructor(private readonly files: ConsoleFiles) {}

  @Get('assets/:name')
  asset(@Param('name') name: string, @Req() request: Request, @Res() response: Response): void {
    const file = `assets/${name}`;
    if (!this.files.has(file)) throw this.missing('Console file');
    this.files.send(request, response, file);
  }

  @Get()
  page(@Req() request: Request, @Res() response: Response): void {
    this.sendPage(request, response);
  }

  @Get('*path')
  route(@Req() request: Request, @Res() response: Response): void {
    this.sendPage(request, response);
  }

  private sendPage(request: Request, response: Response): void {
    if (!this.files.built) throw this.missing('Console');
    this.files.send(request, response, CONSOLE_PAGE);
  }

  private missing(what: string): AppError {
    return this.files.built
      ? AppError.notFound(what)
      : new AppError('not_found', 'The console is not built: run `npm run build`');
  }
}
