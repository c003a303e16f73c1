import { ValidateBy } from 'class-validator';

// C0 and C1 control characters, DEL and the NUL byte: never valid in identifiers or names. Nor
// the bidirectional embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069): a member
// named with U+202E, or an end user's id, read otherwise in the console than it is (found by
// review); right-to-left text needs none of them (the marks U+200E, U+200F stay allowed).
// eslint-disable-next-line no-control-regex -- matching control characters is the point
export const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

export const NoControlCharacters = () =>
  ValidateBy({
    name: 'noControlCharacters',
    validator: {
      validate: (value) => typeof value === 'string' && !CONTROL_CHARACTER.test(value),
      defaultMessage: () => '$property must not contain control characters',
    },
  });
