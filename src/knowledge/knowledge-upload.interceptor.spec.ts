import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { lastValueFrom, of } from 'rxjs';
import { AppError } from '../common/errors/app-error';
import type { OrganizationsService } from '../organizations/organizations.service';
import { htmlToText } from './html-text';
import { KnowledgeUploadInterceptor } from './knowledge-upload.interceptor';
import type { KnowledgeService } from './knowledge.service';

jest.mock('./html-text', () => ({ htmlToText: jest.fn(() => Promise.resolve('The page text.')) }));

const ORGANIZATION = '00000000-0000-4000-8000-000000000001';
const OURS = '00000000-0000-4000-8000-0000000000a1';
const THEIRS = '00000000-0000-4000-8000-0000000000b2';
const MAKER = '00000000-0000-4000-8000-0000000000c3';

const converted = jest.mocked(htmlToText);

/** The interceptor with an organization made by MAKER that holds the personality OURS. */
function interceptor() {
  const organizations = { accountOf: jest.fn(() => Promise.resolve(MAKER)) };
  const knowledge = {
    assertPersonalities: jest.fn((_organizationId: string, ids: string[] | undefined) =>
      ids?.some((id) => id !== OURS)
        ? Promise.reject(AppError.notFound('Personality'))
        : Promise.resolve(),
    ),
  };
  return new KnowledgeUploadInterceptor(
    organizations as unknown as OrganizationsService,
    knowledge as unknown as KnowledgeService,
  );
}

/** A multipart upload of an HTML page with these form fields, as FileInterceptor leaves it. */
function upload(fields: Record<string, string>, headers: Record<string, string> = {}) {
  const request = {
    is: (type: string) => type === 'multipart/form-data',
    headers,
    body: { ...fields },
    file: { buffer: Buffer.from('<p>A page.</p>'), mimetype: 'text/html' },
    caller: { kind: 'api_key', organizationId: ORGANIZATION, scopes: ['read_write'] },
  };
  const response = new ServerResponse(new IncomingMessage(new Socket()));
  const context = {
    switchToHttp: () => ({ getRequest: () => request, getResponse: () => response }),
  } as unknown as ExecutionContext;
  return { request, context };
}

const handled: CallHandler = { handle: () => of('handled') };

async function refusal(outcome: Promise<unknown>): Promise<AppError> {
  const error = await outcome.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe('KnowledgeUploadInterceptor', () => {
  beforeEach(() => converted.mockClear());

  it("converts the page in its maker's account once the form is valid, and hands the text on", async () => {
    const { request, context } = upload({ title: 'Hours', personality_ids: OURS });
    await expect(lastValueFrom(interceptor().intercept(context, handled))).resolves.toBe('handled');
    expect(converted).toHaveBeenCalledTimes(1);
    expect(converted.mock.calls[0][1]).toMatchObject({ account: MAKER });
    expect(request.body).toEqual({
      title: 'Hours',
      personality_ids: [OURS],
      content: 'The page text.',
    });
  });

  it('refuses a form with a bad field (400) or a personality not the organization’s (404) before converting', async () => {
    const untitled = await refusal(
      lastValueFrom(interceptor().intercept(upload({ title: '' }).context, handled)),
    );
    expect(untitled.code).toBe('validation_failed');
    expect(untitled.details).toEqual([{ field: 'title', problem: expect.any(String) }]);

    const foreign = await refusal(
      lastValueFrom(
        interceptor().intercept(
          upload({ title: 'Hours', personality_ids: `${OURS},${THEIRS}` }).context,
          handled,
        ),
      ),
    );
    expect(foreign.code).toBe('not_found');
    expect(converted).not.toHaveBeenCalled();
  });

  it('refuses a key that is not one (400) before converting, as the key would be after', async () => {
    const { context } = upload({ title: 'Hours' }, { 'idempotency-key': '' });
    expect(() => interceptor().intercept(context, handled)).toThrow(AppError);
    expect(converted).not.toHaveBeenCalled();
  });

  it('converts a keyed upload unchecked: its retry is answered by its key, whatever the form', async () => {
    const { context } = upload(
      { title: '', personality_ids: THEIRS },
      { 'idempotency-key': 'upload-1' },
    );
    await expect(lastValueFrom(interceptor().intercept(context, handled))).resolves.toBe('handled');
    expect(converted).toHaveBeenCalledTimes(1);
  });
});
