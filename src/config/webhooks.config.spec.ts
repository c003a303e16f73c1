import { parsePortRanges, webhooksConfig } from './webhooks.config';

describe('webhooks config', () => {
  it('reads WEBHOOK_ALLOWED_PORTS as ports and ranges', () => {
    expect(parsePortRanges('443, 9000-9100,8080')).toEqual([
      [443, 443],
      [9000, 9100],
      [8080, 8080],
    ]);
    expect(parsePortRanges('1-65535')).toEqual([[1, 65535]]);
  });

  it.each(['0', '65536', '9100-9000', '80,', 'http', '80;443'])(
    'stops start-up on WEBHOOK_ALLOWED_PORTS=%s, naming the variable',
    (value) => {
      const saved = process.env.WEBHOOK_ALLOWED_PORTS;
      process.env.WEBHOOK_ALLOWED_PORTS = value;
      try {
        expect(() => webhooksConfig()).toThrow(/WEBHOOK_ALLOWED_PORTS/);
      } finally {
        if (saved === undefined) delete process.env.WEBHOOK_ALLOWED_PORTS;
        else process.env.WEBHOOK_ALLOWED_PORTS = saved;
      }
    },
  );

  it('allows the web ports by default', () => {
    const saved = process.env.WEBHOOK_ALLOWED_PORTS;
    delete process.env.WEBHOOK_ALLOWED_PORTS;
    try {
      expect(webhooksConfig().allowedPorts).toEqual([
        [80, 80],
        [443, 443],
        [8080, 8080],
        [8443, 8443],
      ]);
    } finally {
      if (saved !== undefined) process.env.WEBHOOK_ALLOWED_PORTS = saved;
    }
  });
});
