import type { Type } from '@nestjs/common';
import { ApiExtraModels, getSchemaPath } from '@nestjs/swagger';
import type { OpenAPIObject } from '@nestjs/swagger';

type SchemaObject = NonNullable<OpenAPIObject['components']>['schemas'] extends
  Record<string, infer Schema> | undefined
  ? Schema
  : never;

/** Named unions, filled as the decorators below are applied (when their modules load). */
const unions = new Map<string, SchemaObject>();

/**
 * Declares a named discriminated union: `name` is one of the models of `mapping`, told apart by
 * `propertyName`, whose value is the mapping's key (`{'end_user.created': EndUserCreatedEventDto}`).
 * A class cannot declare a oneOf at its root, so the union is added to the document's schemas by
 * buildOpenApiDocument; the models themselves are registered as extra models where the decorator
 * is applied (a controller). Refer to the union with `unionSchemaRef(name)`.
 */
export function ApiUnionSchema(
  name: string,
  propertyName: string,
  mapping: Record<string, Type<unknown>>,
): ClassDecorator & MethodDecorator {
  const models = Object.values(mapping);
  unions.set(name, {
    oneOf: models.map((model) => ({ $ref: getSchemaPath(model) })),
    discriminator: {
      propertyName,
      mapping: Object.fromEntries(
        Object.entries(mapping).map(([value, model]) => [value, getSchemaPath(model)]),
      ),
    },
  });
  return ApiExtraModels(...models);
}

export function unionSchemaRef(name: string): { $ref: string } {
  return { $ref: `#/components/schemas/${name}` };
}

/** Adds the unions declared with ApiUnionSchema to the document's schemas. */
export function addUnionSchemas(document: OpenAPIObject): void {
  const schemas = ((document.components ??= {}).schemas ??= {});
  for (const [name, schema] of unions) schemas[name] = schema;
}
