/** `ada@example.com` → `a***@example.com`: enough to follow a mail in the log, not to harvest. */
export function maskAddress(address: string): string {
  const at = address.lastIndexOf('@');
  return at <= 0 ? '***' : `${address[0]}***${address.slice(at)}`;
}

const LOCAL_PART = /[A-Za-z0-9._%+-]/;
const DOMAIN = /[A-Za-z0-9.-]/;
/** RFC 5321's longest local part and domain: each `@` is read at most this far either way. */
const LONGEST_LOCAL_PART = 64;
const LONGEST_DOMAIN = 255;
const ENDS_IN_A_NAME = /\.[A-Za-z]{2,}$/;

/**
 * Every e-mail address in `text` masked as maskAddress does. Error messages quote them (an SMTP
 * server's `550 <someone@example.com>: Recipient address rejected`), found by review. Linear:
 * each `@` is read a bounded distance either way, without a backtracking expression.
 */
export function maskAddresses(text: string): string {
  let out = '';
  let copied = 0;
  for (let at = text.indexOf('@'); at !== -1; at = text.indexOf('@', at + 1)) {
    let start = at;
    while (start > copied && at - start < LONGEST_LOCAL_PART && LOCAL_PART.test(text[start - 1])) {
      start--;
    }
    let end = at + 1;
    while (end < text.length && end - at <= LONGEST_DOMAIN && DOMAIN.test(text[end])) end++;
    // A sentence's full stop or a dash after the address is not part of its domain.
    while (end > at + 1 && (text[end - 1] === '.' || text[end - 1] === '-')) end--;
    const domain = text.slice(at + 1, end);
    if (start === at || !ENDS_IN_A_NAME.test(domain)) continue;
    out += `${text.slice(copied, start)}${maskAddress(text.slice(start, end))}`;
    copied = end;
    at = end - 1;
  }
  return out + text.slice(copied);
}
