import type { DiscoveryService, MetadataScanner } from '@nestjs/core';

/** A provider's method marked with a discoverable decorator, bound to its instance. */
export interface MarkedMethod<Meta, Method> {
  /** `Class.method`. */
  readonly name: string;
  readonly meta: Meta;
  readonly method: Method;
}

/**
 * Every method of every provider that carries the metadata `key` (a DiscoveryService decorator's
 * KEY), so that the module running them needs no list of the modules taking part. Throws when
 * two have one name: one provider registered in two modules would take part twice.
 */
export function markedMethods<Meta, Method>(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  key: string,
): Array<MarkedMethod<Meta, Method>> {
  const found: Array<MarkedMethod<Meta, Method>> = [];
  for (const wrapper of discovery.getProviders()) {
    const instance = wrapper.instance as Record<string, unknown> | undefined;
    // A request-scoped or transient provider has no instance to call (a transient one's is a
    // bare prototype, its constructor never run): marked, it is a mistake that would otherwise
    // leave its part out, or fail inside the transaction, without a word at start-up.
    if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
      const prototype = (wrapper.metatype as { prototype?: object } | null)?.prototype;
      if (prototype && hasMarkedMethod(scanner, prototype, key)) {
        throw new Error(`${wrapper.name} is not a singleton: its methods marked ${key} cannot run`);
      }
      continue;
    }
    if (!instance || typeof instance !== 'object') continue;
    for (const method of scanner.getAllMethodNames(
      Object.getPrototypeOf(instance) as object | null,
    )) {
      const meta = Reflect.getMetadata(key, instance[method] as object) as Meta | undefined;
      if (meta === undefined) continue;
      found.push({
        name: `${instance.constructor.name}.${method}`,
        meta,
        method: (instance[method] as (...args: unknown[]) => unknown).bind(instance) as Method,
      });
    }
  }
  const names = new Set<string>();
  for (const { name } of found) {
    if (names.has(name)) throw new Error(`two methods marked ${key} are named ${name}`);
    names.add(name);
  }
  return found;
}

function hasMarkedMethod(scanner: MetadataScanner, prototype: object, key: string): boolean {
  return scanner
    .getAllMethodNames(prototype)
    .some(
      (method) =>
        Reflect.getMetadata(key, (prototype as Record<string, unknown>)[method] as object) !==
        undefined,
    );
}
