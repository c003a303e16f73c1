import { Matches } from 'class-validator';

// C0 and C1 control characters, DEL and the NUL byte: never valid in identifiers or names.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const NO_CONTROL_CHARACTERS = /^[^\u0000-\u001f\u007f-\u009f]*$/;

export const NoControlCharacters = () =>
  Matches(NO_CONTROL_CHARACTERS, { message: '$property must not contain control characters' });
