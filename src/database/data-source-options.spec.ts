import { sessionOptions } from './data-source-options';

describe('sessionOptions', () => {
  const saved = process.env.PGOPTIONS;
  afterEach(() => {
    if (saved === undefined) delete process.env.PGOPTIONS;
    else process.env.PGOPTIONS = saved;
  });

  it('turns JIT off, with the settings asked for after it', () => {
    delete process.env.PGOPTIONS;
    expect(sessionOptions()).toBe('-c jit=off');
    expect(sessionOptions('-c synchronous_commit=off')).toBe(
      '-c jit=off -c synchronous_commit=off',
    );
  });

  it("keeps the operator's PGOPTIONS, which pg would otherwise have sent alone", () => {
    process.env.PGOPTIONS = '-c search_path=app';
    expect(sessionOptions()).toBe('-c search_path=app -c jit=off');
  });
});
