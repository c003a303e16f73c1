import { ApiPropertyOptional } from '@nestjs/swagger';
import { ValidateBy } from 'class-validator';
import { DEFAULT_LANGUAGE, isLanguage, LANGUAGES } from '../languages';

/** A BCP 47 primary language subtag the service knows (languages.ts). */
export const IsLanguage = () =>
  ValidateBy({
    name: 'isLanguage',
    validator: {
      validate: (value) => isLanguage(value),
      defaultMessage: () =>
        '$property must be a BCP 47 primary language subtag (ISO 639-1), such as en, de, fr or es',
    },
  });

export const LANGUAGE_PROPERTY = {
  enum: LANGUAGES,
  default: DEFAULT_LANGUAGE,
  description:
    "The personality's language (a BCP 47 primary language subtag): its memories are searched in it",
} as const;

export const ApiLanguageProperty = () => ApiPropertyOptional(LANGUAGE_PROPERTY);
