import { Injectable, Scope } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { markedMethods } from './marked-methods';

const Marked = DiscoveryService.createDecorator<string>();

@Injectable()
class Singleton {
  @Marked('first')
  first(): string {
    return 'first ran';
  }

  unmarked(): string {
    return 'never found';
  }
}

@Injectable({ scope: Scope.REQUEST })
class PerRequest {
  @Marked('lost')
  lost(): string {
    return 'never runs';
  }
}

@Injectable({ scope: Scope.TRANSIENT })
class PerInjection {
  @Marked('lost')
  lost(): string {
    return 'never runs';
  }
}

async function found(...providers: Array<new () => object>) {
  const moduleRef = await Test.createTestingModule({
    imports: [DiscoveryModule],
    providers,
  }).compile();
  try {
    return markedMethods<string, () => string>(
      moduleRef.get(DiscoveryService),
      moduleRef.get(MetadataScanner),
      Marked.KEY,
    );
  } finally {
    await moduleRef.close();
  }
}

describe('markedMethods', () => {
  it('finds the marked methods of singletons, bound, with their metadata and names', async () => {
    const methods = await found(Singleton);
    expect(methods.map(({ name, meta }) => ({ name, meta }))).toEqual([
      { name: 'Singleton.first', meta: 'first' },
    ]);
    expect(methods[0].method()).toBe('first ran');
  });

  it('refuses a marked method on a provider that is not a singleton, instead of leaving it out', async () => {
    await expect(found(Singleton, PerRequest)).rejects.toThrow(/PerRequest is not a singleton/);
    await expect(found(Singleton, PerInjection)).rejects.toThrow(/PerInjection is not a singleton/);
  });
});
