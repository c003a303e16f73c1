import type { DynamicModule, Type } from '@nestjs/common';
import { Test, type TestingModule, type TestingModuleBuilder } from '@nestjs/testing';
import { CoreModule } from '../../src/core.module';

/**
 * A feature module on the core the server and the CLI share (configuration, the database, the
 * clock, logs, metrics), without HTTP and without the server's background jobs: what the
 * "medium" specs of test/services run a module's rules on. `env` is read while the module is
 * built (its configuration) and restored after; `override`, when given, changes the builder
 * before it compiles (a provider replaced, e.g. the Clock by a ManualClock).
 */
export async function moduleAlone(
  modules: Array<Type | DynamicModule>,
  env: Record<string, string | undefined> = {},
  override?: (builder: TestingModuleBuilder) => TestingModuleBuilder,
): Promise<TestingModule> {
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  const apply = (values: Record<string, string | undefined>) => {
    for (const [name, value] of Object.entries(values)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
  apply(env);
  let moduleRef: TestingModule;
  try {
    const builder = Test.createTestingModule({
      imports: [CoreModule.forRole('command'), ...modules],
    });
    moduleRef = await (override ? override(builder) : builder).compile();
  } finally {
    apply(saved);
  }
  try {
    await moduleRef.init();
  } catch (error) {
    // Its pool and connections would otherwise outlive the failed spec.
    await moduleRef.close();
    throw error;
  }
  return moduleRef;
}
