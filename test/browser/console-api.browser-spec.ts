import { api, ApiError, setCredentials, setOrganization } from '../../web/src/api';

/** The console's one way to the API: which organization a call is sent in (§3, §28). */
describe('the console’s API calls', () => {
  const sent: Array<{ url: string; organization: string | null }> = [];
  const realFetch = globalThis.fetch;

  beforeAll(() => {
    globalThis.fetch = (async (url: string, init: RequestInit) => {
      const headers = init.headers as Record<string, string>;
      sent.push({ url, organization: headers['x-organization-id'] ?? null });
      return new Response('{"data":[],"has_more":false}', { status: 200 });
    }) as typeof fetch;
    setCredentials('token', 3_600);
  });
  afterAll(() => {
    globalThis.fetch = realFetch;
  });
  beforeEach(() => {
    sent.length = 0;
  });

  it('sends an organization’s call in the organization picked', async () => {
    setOrganization('org-a');
    await api('GET', '/v1/personalities');
    expect(sent).toEqual([{ url: '/v1/personalities', organization: 'org-a' }]);
  });

  it('sends none once no organization is picked, rather than act in the user’s first one', async () => {
    setOrganization(null);
    const refused = await api('GET', '/v1/personalities').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).code).toBe('no_organization');
    expect(sent).toEqual([]);
    // A call about the user still goes, without the header.
    await api('GET', '/v1/organizations', { asUser: true });
    expect(sent).toEqual([{ url: '/v1/organizations', organization: null }]);
  });
});
