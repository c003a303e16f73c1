import { ValidationError, ValidationPipe } from '@nestjs/common';
import { AppError, FieldProblem } from '../errors/app-error';

/** Flattens nested class-validator errors into `{field, problem}` pairs with dotted paths. */
export function toFieldProblems(errors: ValidationError[], parent = ''): FieldProblem[] {
  return errors.flatMap((error) => {
    const field = parent ? `${parent}.${error.property}` : error.property;
    const own = Object.entries(error.constraints ?? {}).map(([rule, text]) => ({
      field,
      problem: rule === 'whitelistValidation' ? 'is not a known field' : text,
    }));
    return [...own, ...toFieldProblems(error.children ?? [], field)];
  });
}

/**
 * Rejects unknown fields (whitelist + forbidNonWhitelisted) and answers 400 `validation_failed`
 * with every problem listed, so a client can fix a request in one round trip.
 */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => AppError.validation(toFieldProblems(errors)),
  });
}
