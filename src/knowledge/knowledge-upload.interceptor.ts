import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import { from, type Observable, switchMap } from 'rxjs';
import { organizationOf, type RequestWithCaller } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { findUnsafeContent } from '../common/validation/untrusted-json';
import { clientGoneSignal } from '../common/http/client-signal';
import { IDEMPOTENCY_KEY_HEADER, parseIdempotencyKey } from '../common/http/idempotency-key';
import { createValidationPipe } from '../common/validation/validation.pipe';
import { OrganizationsService } from '../organizations/organizations.service';
import { CreateKnowledgeDto, DOCUMENT_MAX_BYTES } from './dto/knowledge.dto';
import { htmlToText } from './html-text';
import { KnowledgeService } from './knowledge.service';

/** The `file` part as multer (memory storage) leaves it on the request. */
interface UploadedPart {
  buffer: Buffer;
  mimetype: string;
}

/** Types a document may be uploaded as: their text is stored, HTML's reduced to it. */
export const UPLOAD_TYPES = ['text/plain', 'text/markdown', 'text/html'] as const;

/** Multer's limits for POST /v1/knowledge: one file of at most 1 MiB, a few short fields. */
export const UPLOAD_LIMITS = {
  fileSize: DOCUMENT_MAX_BYTES,
  files: 1,
  fields: 8,
  fieldSize: 64 * 1024,
  parts: 9,
};

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The text of an uploaded file: UTF-8 (a byte order mark aside), HTML without its markup
 * (`convertHtml`).
 */
async function textOf(
  file: UploadedPart,
  convertHtml: (html: string) => Promise<string>,
): Promise<string> {
  const type = file.mimetype.split(';')[0].trim().toLowerCase();
  if (!(UPLOAD_TYPES as readonly string[]).includes(type)) {
    throw new AppError(
      'unsupported_media_type',
      `The file must be one of ${UPLOAD_TYPES.join(', ')}`,
    );
  }
  let text: string;
  try {
    text = UTF8.decode(file.buffer);
  } catch {
    throw AppError.validation([{ field: 'file', problem: 'must be UTF-8 text' }]);
  }
  // PostgreSQL's text cannot hold U+0000 (a JSON body is refused it by the body parser's check).
  if (text.includes('\u0000')) {
    throw AppError.validation([{ field: 'file', problem: 'must not contain U+0000' }]);
  }
  // Off the event loop and time-limited: markup can take seconds to reduce (html-text.ts).
  return type === 'text/html' ? convertHtml(text) : text;
}

/** `personality_ids` of a form: one field of ids separated by commas, or the field repeated. */
function idsOf(value: unknown): unknown {
  const values = Array.isArray(value) ? value : [value];
  if (!values.every((item) => typeof item === 'string')) return value;
  return values.flatMap((item) =>
    item
      .split(',')
      .map((id) => id.trim())
      .filter((id) => id.length > 0),
  );
}

/**
 * After FileInterceptor, a multipart upload is given the shape of the JSON one, so that one DTO
 * and its validation serve both: `content` is the file's text, `personality_ids` a list.
 */
@Injectable()
export class KnowledgeUploadInterceptor implements NestInterceptor {
  private readonly validation = createValidationPipe();

  constructor(
    private readonly organizations: OrganizationsService,
    private readonly knowledge: KnowledgeService,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest<Request & RequestWithCaller & { file?: UploadedPart }>();
    if (!request.is('multipart/form-data')) return next.handle();
    // Multer's fields: strings, or arrays of them for a repeated field.
    const fields = request.body as Record<string, unknown> | undefined;
    // As a JSON body's are: the ValidationPipe strips these keys before its unknown-field check
    // could name them, so they would pass silently (found by review).
    const unsafe = fields ? findUnsafeContent(fields) : null;
    if (unsafe) throw AppError.validation([unsafe]);
    const body: Record<string, unknown> = { ...fields };
    if ('content' in body) {
      throw AppError.validation([
        { field: 'content', problem: 'comes from the file part in a multipart upload' },
      ]);
    }
    if (!request.file) {
      throw AppError.validation([
        { field: 'file', problem: `must be given (${UPLOAD_TYPES.join(', ')})` },
      ]);
    }
    if (body.personality_ids !== undefined) {
      const ids = idsOf(body.personality_ids);
      // A form cannot send an empty list: an empty field is more likely a blank input than a
      // choice of no personality, which attached the document to none (found by review).
      if (Array.isArray(ids) && ids.length === 0) {
        throw AppError.validation([
          {
            field: 'personality_ids',
            problem:
              'names no personality: leave the field out for every personality, or send JSON with [] for none',
          },
        ]);
      }
      body.personality_ids = ids;
    }
    const organizationId = organizationOf(request, 'a document upload');
    const signal = clientGoneSignal(http.getResponse<Response>());
    const key = request.headers[IDEMPOTENCY_KEY_HEADER];
    // A key that is not one is refused now (400), as IdempotencyInterceptor would after the
    // conversion: it does not spare a form the checks below.
    if (key !== undefined) parseIdempotencyKey(key);
    const keyed = key !== undefined;
    return from(
      textOf(request.file, (html) => this.convert(html, body, organizationId, signal, keyed)),
    ).pipe(
      switchMap((content) => {
        body.content = content;
        request.body = body;
        return next.handle();
      }),
    );
  }

  /**
   * The page's text, once the form's other fields are valid and its personalities the
   * organization's: a conversion takes one of the instance's few, and was spent on uploads
   * refused afterwards for an empty title or a personality of no one's (found by two reviews).
   * The ValidationPipe checks the whole body again with the text, the write the personalities.
   * Not for a keyed upload: its key is looked up after this interceptor (the fingerprint covers
   * the page's text), and a retry gets the stored answer, or 422 for another form, whatever the
   * form or the personalities are now (contract §16); such a form is refused after its
   * conversion, as any was before.
   */
  private async convert(
    html: string,
    fields: Record<string, unknown>,
    organizationId: string,
    signal: AbortSignal,
    keyed: boolean,
  ): Promise<string> {
    if (!keyed) {
      const form = (await this.validation.transform(
        { ...fields, content: '' },
        { type: 'body', metatype: CreateKnowledgeDto },
      )) as CreateKnowledgeDto;
      await this.knowledge.assertPersonalities(organizationId, form.personality_ids);
    }
    const account = await this.organizations.accountOf(organizationId);
    return htmlToText(html, { account, signal });
  }
}
