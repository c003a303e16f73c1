import type { EntityManager } from 'typeorm';
import type { WithEntry } from '../../database/sql';
import {
  type CountedTokens,
  EXCHANGE_SOURCES,
  type ExchangeContribution,
  type ExchangeSourceName,
  type ExchangeSources,
  type ReplyAdmission,
  type ReplyStoreParticipant,
  type StoredExchange,
  StoresReplies,
  type StoresRepliesOptions,
} from './reply-store';

interface Member {
  name: string;
  lends: readonly ExchangeSourceName[];
  participant: ReplyStoreParticipant;
}

/**
 * The statement storing an exchange, as its participants wrote it: `steps` in order (every
 * source's first), and what must be locked first (run in a transaction when there is any).
 */
export interface ExchangeStatement {
  steps: WithEntry[];
  underLock: Array<(manager: EntityManager) => Promise<WithEntry[]>>;
}

/**
 * The statement storing a reply, composed of its @StoresReplies participants in one order: the
 * lenders (by their first source in EXCHANGE_SOURCES), then the admissions' steps, then the
 * others by class name, then what needs a lock. The order never depends on how modules were
 * imported, so the statement's text (and its prepared name) is one per shape.
 */
export class ExchangeComposer {
  private readonly members: readonly Member[];
  /** The members that lend sources, and the others: each statement asks them in turn. */
  private readonly lenders: readonly Member[];
  private readonly others: readonly Member[];

  /**
   * Refuses two participants lending the same source, naming both, and a lender of `tokens`
   * that cannot count a turn's tokens without a reply.
   */
  constructor(participants: readonly ReplyStoreParticipant[]) {
    const lenders = new Map<ExchangeSourceName, string>();
    const members = participants.map((participant) => {
      const name = participant.constructor.name;
      const options = (Reflect.getMetadata(StoresReplies.KEY, participant.constructor) ??
        {}) as StoresRepliesOptions;
      const lends = options.lends ?? [];
      for (const source of lends) {
        const earlier = lenders.get(source);
        if (earlier) throw new Error(`${earlier} and ${name} both lend ${source} to replies`);
        lenders.set(source, name);
      }
      if (lends.includes('tokens') && !participant.countTokens) {
        throw new Error(`${name} lends tokens to replies but counts no tokens without one`);
      }
      return { name, lends, participant };
    });
    const rank = ({ lends }: Member) =>
      lends.length > 0
        ? Math.min(...lends.map((source) => EXCHANGE_SOURCES.indexOf(source)))
        : EXCHANGE_SOURCES.length;
    this.members = members.sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
    this.lenders = this.members.filter(({ lends }) => lends.length > 0);
    this.others = this.members.filter(({ lends }) => lends.length === 0);
  }

  /** The sources no participant lends: a reply cannot be stored without them. */
  unlent(): ExchangeSourceName[] {
    const lent = new Set(this.members.flatMap(({ lends }) => lends));
    return EXCHANGE_SOURCES.filter((source) => !lent.has(source));
  }

  storeExchange(
    exchange: StoredExchange,
    admissions: readonly ReplyAdmission[],
  ): ExchangeStatement {
    return this.compose(
      EXCHANGE_SOURCES,
      admissions,
      (participant, sources) => participant.storeExchange(exchange, sources),
      (admission, sources) => admission.storeExchange(exchange, sources),
    );
  }

  /** The statement counting a turn's tokens without a reply (a pause, a failure). */
  countTokens(counted: CountedTokens, admissions: readonly ReplyAdmission[]): WithEntry[] {
    return this.compose(
      ['tokens'],
      admissions,
      (participant, sources) => participant.countTokens?.(counted, sources) ?? { steps: [] },
      (admission, sources) => admission.countTokens(counted, sources),
    ).steps;
  }

  private compose(
    required: readonly ExchangeSourceName[],
    admissions: readonly ReplyAdmission[],
    contribute: (
      participant: ReplyStoreParticipant,
      sources: ExchangeSources,
    ) => ExchangeContribution,
    admit: (admission: ReplyAdmission, sources: ExchangeSources) => WithEntry[],
  ): ExchangeStatement {
    const statement: ExchangeStatement = { steps: [], underLock: [] };
    // Filled by the lenders, asked first and shown none (no lender reads another's source).
    const sources = {} as ExchangeSources;
    const add = ({ name, lends, participant }: Member) => {
      const contribution = contribute(
        participant,
        lends.length > 0 ? ({} as ExchangeSources) : sources,
      );
      statement.steps.push(...contribution.steps);
      for (const source of lends.filter((lent) => required.includes(lent))) {
        const lent = contribution.lends?.[source];
        if (lent === undefined) throw new Error(`${name} did not lend ${source}`);
        Object.assign(sources, { [source]: lent });
      }
      if (contribution.underLock) statement.underLock.push(contribution.underLock);
    };
    this.lenders.forEach(add);
    for (const admission of admissions) statement.steps.push(...admit(admission, sources));
    this.others.forEach(add);
    return statement;
  }
}
