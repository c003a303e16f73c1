import { Controller, Get, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { readFileSync } from 'node:fs';

/**
 * The baseline of the benchmarks: a bare NestJS (Express) app, no middleware, no logging, no
 * guard, answering a fixed JSON body. Usage: bare-server <port> <body.json>.
 */
const [port, bodyFile] = process.argv.slice(2);
const body: unknown = JSON.parse(readFileSync(bodyFile, 'utf8'));

@Controller()
class BareController {
  @Get('*path')
  answer(): unknown {
    return body;
  }
}

@Module({ controllers: [BareController] })
class BareModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create(BareModule, { logger: false });
  await app.listen(Number(port), '127.0.0.1');
  process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
}

void main();
