import { generateApiKey, hashApiKey, isWellFormedApiKey, looksLikeApiKey } from './api-key-format';

describe('API key format', () => {
  it('generates distinct well-formed keys with the pk_ prefix', () => {
    const keys = Array.from({ length: 200 }, generateApiKey);
    expect(new Set(keys).size).toBe(200);
    for (const key of keys) {
      expect(key).toMatch(/^pk_[0-9A-Za-z]{49}$/);
      expect(looksLikeApiKey(key)).toBe(true);
      expect(isWellFormedApiKey(key)).toBe(true);
    }
  });

  it('rejects a key with any single character changed (checksum)', () => {
    const key = generateApiKey();
    let rejected = 0;
    for (let i = 3; i < key.length; i++) {
      const replacement = key[i] === 'a' ? 'b' : 'a';
      const typo = key.slice(0, i) + replacement + key.slice(i + 1);
      if (!isWellFormedApiKey(typo)) rejected++;
    }
    expect(rejected).toBe(key.length - 3);
  });

  it('rejects wrong lengths and characters', () => {
    const key = generateApiKey();
    expect(isWellFormedApiKey(key.slice(0, -1))).toBe(false);
    expect(isWellFormedApiKey(`${key}a`)).toBe(false);
    expect(isWellFormedApiKey(key.replace(/.$/, '-'))).toBe(false);
    expect(isWellFormedApiKey('eyJhbGciOiJIUzI1NiJ9.e30.x')).toBe(false);
  });

  it('hashes with SHA-256', () => {
    expect(hashApiKey('pk_x')).toHaveLength(32);
    expect(hashApiKey('pk_x').equals(hashApiKey('pk_x'))).toBe(true);
  });
});
