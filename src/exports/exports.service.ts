import { Injectable } from '@nestjs/common';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { type DocumentSubject, ExportsRepository, type Section } from './exports.repository';

/** Text is flushed to the response in chunks of about this size. */
export const CHUNK_BYTES = 64 * 1024;
/** Rows read per statement: a page of typical memories is tens of KB, of the longest 2 MB. */
const PAGE_ROWS = 250;

/**
 * Export (PMF v1) and subject access documents, streamed: PostgreSQL renders each row as JSON
 * text, the process holds one page at a time, and no connection is held between pages, so a
 * client that stops reading costs the database nothing. Memories are bounded by the newest one
 * at the start, so a conversation that goes on during a long export is not half in it.
 */
@Injectable()
export class ExportsService {
  constructor(
    private readonly repository: ExportsRepository,
    private readonly clock: Clock,
  ) {}

  /** The PMF v1 document; 404 (before anything is sent) for an unknown or foreign user. */
  async exportDocument(organizationId: string, userId: string): Promise<AsyncIterable<string>> {
    const subject = await this.subject(organizationId, userId);
    const head = `{"format":"pmf","version":1,"exported_at":${JSON.stringify(this.clock.now().toISOString())},"end_user":${subject.exportDocument}`;
    return this.write(subject, head, this.repository.exportSections, '}');
  }

  /** Subject access: every stored row that concerns the user, as the database holds it. */
  async modelDocument(organizationId: string, userId: string): Promise<AsyncIterable<string>> {
    const subject = await this.subject(organizationId, userId);
    const head = `{"user_id":${JSON.stringify(subject.userId)},"generated_at":${JSON.stringify(this.clock.now().toISOString())},"tables":{"end_users":[${subject.rowDocument}]`;
    return this.write(subject, head, this.repository.modelSections, '}}');
  }

  private async subject(organizationId: string, userId: string): Promise<DocumentSubject> {
    const subject = await this.repository.findSubject(organizationId, userId);
    if (!subject) throw AppError.notFound('End user');
    return subject;
  }

  private async *write(
    subject: DocumentSubject,
    head: string,
    sections: Section[],
    tail: string,
  ): AsyncGenerator<string> {
    let buffer = head;
    for (const section of sections) {
      buffer += `,${JSON.stringify(section.key)}:[`;
      let first = true;
      let after: string[] | null = section.first;
      while (after) {
        const page = await section.page(subject, after, PAGE_ROWS);
        for (const doc of page.docs) {
          buffer += first ? doc : `,${doc}`;
          first = false;
          if (buffer.length >= CHUNK_BYTES) {
            yield buffer;
            buffer = '';
          }
        }
        after = page.next;
      }
      buffer += ']';
    }
    // Erased while the pages were read: the later sections came back empty, and a document
    // closed now would pass for a complete one. Cut instead (a 404 if nothing was sent yet).
    if (!(await this.repository.subjectRemains(subject))) throw AppError.notFound('End user');
    yield buffer + tail;
  }
}
