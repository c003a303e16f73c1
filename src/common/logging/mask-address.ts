/** `ada@example.com` → `a***@example.com`: enough to follow a mail in the log, not to harvest. */
export function maskAddress(address: string): string {
  const at = address.lastIndexOf('@');
  return at <= 0 ? '***' : `${address[0]}***${address.slice(at)}`;
}
