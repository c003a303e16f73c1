/**
 * Tokens per UTF-8 byte at the bound no text exceeds: a byte-level tokenizer never makes more
 * tokens than bytes, and that is the only bound that holds for any text without the model's own
 * tokenizer. English runs about 4 bytes a token, but rare symbols, emoji and random characters run
 * near one (an estimate of bytes / 3 let concurrent replies of such text be admitted for a third
 * of what they spent; found by review). Admission reserves by it (SpendService), and a call cut
 * before its count came is counted by it (OpenAiResponseEngine).
 */
export const BYTES_PER_TOKEN_AT_MOST = 1;

/** The tokens of `bytes` UTF-8 bytes at that bound. */
export function tokensAtMost(bytes: number): number {
  return Math.ceil(bytes / BYTES_PER_TOKEN_AT_MOST);
}
