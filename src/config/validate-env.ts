import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';

/**
 * Validates the process environment against a class-validator schema and returns the typed,
 * converted values. A bad or missing value throws with the variable's name, which stops start-up.
 */
export function validateEnv<T extends object>(
  schema: new () => T,
  env: NodeJS.ProcessEnv = process.env,
): T {
  // An empty value (`REDIS_URL=` in a compose file) means unset, as operators expect.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const values = plainToInstance(schema, present, { enableImplicitConversion: false });
  const errors = validateSync(values, { skipMissingProperties: false, forbidUnknownValues: false });
  if (errors.length > 0) {
    const lines = errors.map(
      (error) =>
        `${error.property}: ${Object.values(error.constraints ?? { invalid: 'is invalid' }).join('; ')}`,
    );
    throw new Error(`Invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  return values;
}

/** Parses "true"/"false"/"1"/"0" the way operators write booleans in environment files. */
export function toBoolean({ value }: { value: unknown }): unknown {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') return value;
  const normalized = value.trim().toLowerCase();
  if (['true', '1', 'yes'].includes(normalized)) return true;
  if (['false', '0', 'no'].includes(normalized)) return false;
  return value;
}

/** Converts a numeric string to a number, leaving anything else for the validator to reject. */
export function toNumber({ value }: { value: unknown }): unknown {
  if (value === undefined || value === '') return undefined;
  if (typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value.trim())) return Number(value);
  return value;
}
