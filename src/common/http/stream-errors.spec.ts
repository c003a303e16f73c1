import { StreamableFile } from '@nestjs/common';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { AppError } from '../errors/app-error';
import { withEnvelopeOnFailure } from './stream-errors';

type LoggedResponse = ServerResponse & { err?: Error };

/**
 * Runs a document's error handler on a real response, before or after its first byte, and
 * gives what the client read and the error the access line would carry.
 */
async function failDocument(error: Error, afterFirstByte: boolean) {
  let seen: LoggedResponse | undefined;
  const server = createServer((request, response: LoggedResponse) => {
    seen = response;
    (request as typeof request & { id: string }).id = '01TESTREQUEST';
    const file = withEnvelopeOnFailure(new StreamableFile(Readable.from([])));
    if (afterFirstByte) response.write('{"format":"pmf"');
    file.errorHandler(error, response as never);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  try {
    const { port } = server.address() as AddressInfo;
    const answer = await fetch(`http://127.0.0.1:${port}/`)
      .then(async (response) => ({ status: response.status, text: await response.text() }))
      .catch(() => ({ status: 0, text: 'cut' }));
    return { answer, loggedError: seen?.err };
  } finally {
    server.close();
  }
}

describe('withEnvelopeOnFailure', () => {
  it('answers a refusal before the first byte with its envelope, and logs no error for it', async () => {
    const { answer, loggedError } = await failDocument(AppError.notFound('End user'), false);
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.text)).toEqual({
      error: {
        status: 404,
        code: 'not_found',
        message: 'End user not found',
        request_id: '01TESTREQUEST',
      },
    });
    expect(loggedError).toBeUndefined();
  });

  it('answers an unexpected failure before the first byte with a 500, its error on the access line', async () => {
    const failure = new TypeError('a page could not be read');
    const { answer, loggedError } = await failDocument(failure, false);
    expect(answer.status).toBe(500);
    expect(answer.text).not.toContain('a page could not be read');
    expect(loggedError).toBe(failure);
  });

  it('cuts the connection after the first byte, and still logs an unexpected failure', async () => {
    const failure = new TypeError('a page could not be read');
    const { answer, loggedError } = await failDocument(failure, true);
    expect(answer.text).toBe('cut');
    expect(loggedError).toBe(failure);
  });

  it('cuts the connection after the first byte for a refusal, with no error logged', async () => {
    const { answer, loggedError } = await failDocument(AppError.notFound('End user'), true);
    expect(answer.text).toBe('cut');
    expect(loggedError).toBeUndefined();
  });
});
