import type { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';

/** A singleton's instance, or start-up refused: a transient one's would be a bare prototype. */
export function singletonOf<T>(wrapper: InstanceWrapper, role: string): T {
  const instance = wrapper.instance as T | undefined;
  if (!instance || wrapper.isTransient || !wrapper.isDependencyTreeStatic()) {
    throw new Error(`${role} ${String(wrapper.name)} must be a singleton`);
  }
  return instance;
}

/**
 * The instances of the providers carrying `metadataKey`, wherever they are provided; start-up is
 * refused for one that is not a singleton (a transient one's static instance is a bare
 * prototype: its constructor never ran) and for a class provided by two modules (two instances:
 * it would take part in every reply twice).
 */
export function discoveredOnce<T extends object>(
  discovery: DiscoveryService,
  metadataKey: string,
  role: string,
): T[] {
  const seen = new Set<unknown>();
  return discovery.getProviders({ metadataKey }).map((wrapper) => {
    const instance = singletonOf<T>(wrapper, role);
    if (seen.has(wrapper.metatype)) {
      throw new Error(
        `${role} ${String(wrapper.name)} is provided by two modules: it would take part twice`,
      );
    }
    seen.add(wrapper.metatype);
    return instance;
  });
}
