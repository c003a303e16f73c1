/** Numbers, times (always UTC, said so) and files the console writes. */

import { UNSEEN_CHARACTERS } from '../../src/common/text/unseen-characters';

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });

export const formatNumber = (value: number) => integer.format(value);
export const formatDecimal = (value: number) => decimal.format(value);

/** `2026-11-22 01:23 UTC`. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** The current UTC month, YYYY-MM. */
export const currentMonth = () => new Date().toISOString().slice(0, 7);

/** Every day of a UTC month (YYYY-MM-DD). */
export function daysOf(month: string): string[] {
  const [year, monthIndex] = month.split('-').map(Number);
  const count = new Date(Date.UTC(year, monthIndex, 0)).getUTCDate();
  return Array.from({ length: count }, (_, i) => `${month}-${String(i + 1).padStart(2, '0')}`);
}

/**
 * One CSV cell (RFC 4180): quoted when needed; a cell a spreadsheet would read as a formula
 * (=, +, -, @, tab, carriage return first) is prefixed with an apostrophe (OWASP's advice), since
 * names and user_ids are text the organization's own users chose. A cell holding `;` or a tab is
 * quoted too: a spreadsheet whose locale separates with them would split it, and the part after
 * the separator could start with a formula (found by review).
 */
export function csvCell(value: string | number | null): string {
  if (value === null) return '';
  if (typeof value === 'number') return String(value);
  const text = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",;\t\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function toCsv(header: string[], rows: Array<Array<string | number | null>>): string {
  return [header, ...rows].map((row) => row.map(csvCell).join(',')).join('\r\n') + '\r\n';
}

/** Offers `content` as a file download (an object URL, revoked once the browser has it). */
export function download(
  name: string,
  content: Blob | string,
  type = 'text/csv;charset=utf-8',
): void {
  const blob = typeof content === 'string' ? new Blob([content], { type }) : content;
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** JSON as text to show (never as markup), compact. */
export const jsonText = (value: unknown) => JSON.stringify(value, null, 2);

/** A character a page shows as nothing, or as a plain space: written out when it is in an id. */
const UNSEEN = new RegExp(`[^\\S ]|[${UNSEEN_CHARACTERS}]`, 'gu');
/** An id that holds one, a quote or a backslash, or a space at either end or two in a row. */
const NEEDS_QUOTES = new RegExp(`[^\\S ]|[${UNSEEN_CHARACTERS}"\\\\]|^ | $| {2}`, 'u');

/**
 * An id (an end user's `user_id`) as text that tells it apart from its lookalikes: as it is, or,
 * when it holds what a page would hide (a space at either end, two in a row, a no-break or other
 * non-ASCII space, a zero-width or other invisible character), in double quotes with those
 * written as `\uXXXX` (and a quote or backslash escaped, so that no id reads as another's
 * escape). `" bob"`, `"bob "`, `"\u00A0bob"` and `"bob\u200B"` were shown as `bob`, and found
 * and erased as it (found by review).
 */
export function visibleId(id: string): string {
  if (!NEEDS_QUOTES.test(id)) return id;
  const escaped = id.replace(/["\\]/g, '\\$&').replace(UNSEEN, (character) => {
    const code = character.codePointAt(0)!.toString(16).toUpperCase();
    return code.length <= 4 ? `\\u${code.padStart(4, '0')}` : `\\u{${code}}`;
  });
  return `"${escaped}"`;
}
