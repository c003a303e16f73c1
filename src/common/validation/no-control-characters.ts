import { ValidateBy } from 'class-validator';

// C0 and C1 control characters, DEL and the NUL byte: never valid in identifiers or names.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
export const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

export const NoControlCharacters = () =>
  ValidateBy({
    name: 'noControlCharacters',
    validator: {
      validate: (value) => typeof value === 'string' && !CONTROL_CHARACTER.test(value),
      defaultMessage: () => '$property must not contain control characters',
    },
  });
