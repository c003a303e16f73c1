import { type ArgumentMetadata, ParseUUIDPipe } from '@nestjs/common';
import { AppError } from '../errors/app-error';

/**
 * A path id: anything but a UUID names nothing, so it answers 404 like an id that does not exist
 * (not 400), and never reaches the database. A UUID is given on in lower case, as the database
 * spells it: a cache keyed by the id (an organization's limits, its safety settings) is cleared
 * under the key its readers use (found by review: `PATCH /v1/organizations/{ID}/limits` in upper
 * case cleared another key, and replies went on under the old budget for up to 5 s).
 */
class UuidOr404Pipe extends ParseUUIDPipe {
  override async transform(value: string, metadata: ArgumentMetadata): Promise<string> {
    return (await super.transform(value, metadata)).toLowerCase();
  }
}

export const uuidOr404 = (what: string) =>
  new UuidOr404Pipe({ exceptionFactory: () => AppError.notFound(what) });
