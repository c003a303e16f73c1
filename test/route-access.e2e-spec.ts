import { RequestMethod } from '@nestjs/common';
import { INTERCEPTORS_METADATA, METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { DiscoveryModule, DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { IS_PUBLIC, REQUIRED_SCOPE, USER_ONLY } from '../src/common/auth/auth.decorators';
import { IdempotencyInterceptor } from '../src/idempotency/idempotency.interceptor';
import { createTestApp, TestApp } from './support/test-app';

interface Route {
  route: string;
  method: string;
  path: string;
  public: boolean;
  acceptsIdempotencyKey: boolean;
  scope?: string;
  userOnly: boolean;
}

/** Every route the app registers, with the access rule it declares (handler over class). */
function registeredRoutes(t: TestApp): Route[] {
  const discovery = t.app.get(DiscoveryService);
  const scanner = t.app.get(MetadataScanner);
  const reflector = t.app.get(Reflector);
  const routes: Route[] = [];
  for (const wrapper of discovery.getControllers()) {
    const controller = wrapper.metatype as (new (...args: never[]) => object) | undefined;
    if (!controller) continue;
    const base =
      [Reflect.getMetadata(PATH_METADATA, controller) as string | string[]].flat()[0] ?? '';
    for (const name of scanner.getAllMethodNames(controller.prototype)) {
      const handler = (controller.prototype as Record<string, unknown>)[name] as object;
      const path = Reflect.getMetadata(PATH_METADATA, handler) as string | string[] | undefined;
      if (path === undefined) continue;
      const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as number];
      const targets = [handler as () => void, controller];
      const fullPath = `/${[base, [path].flat()[0]].filter((part) => part && part !== '/').join('/')}`;
      const interceptors = (Reflect.getMetadata(INTERCEPTORS_METADATA, handler) ?? []) as unknown[];
      routes.push({
        route: `${method} ${fullPath}`,
        method,
        path: fullPath,
        acceptsIdempotencyKey: interceptors.includes(IdempotencyInterceptor),
        public: reflector.getAllAndOverride<boolean>(IS_PUBLIC, targets) ?? false,
        scope: reflector.getAllAndOverride<string>(REQUIRED_SCOPE, targets),
        userOnly: reflector.getAllAndOverride<boolean>(USER_ONLY, targets) ?? false,
      });
    }
  }
  return routes;
}

describe('Deny by default: every registered route declares its access rule', () => {
  let t: TestApp;
  let routes: Route[];

  beforeAll(async () => {
    // DiscoveryModule only lends the walk its services; it adds no route.
    t = await createTestApp({ imports: [DiscoveryModule] });
    routes = registeredRoutes(t);
  });
  afterAll(() => t.close());

  it('finds the routes (the walk itself works)', () => {
    const names = routes.map((route) => route.route);
    for (const expected of [
      'POST /v1/auth/login',
      'POST /v1/auth/reset-password',
      'GET /v1/api-keys',
      'POST /v1/me/sso/link',
      'POST /v1/auth/sso/login',
      'GET /v1/organizations',
      'GET /v1/organizations/:id/members',
      'POST /v1/invitations/accept',
      'POST /v1/api-keys/:id/roll',
      'GET /v1/audit-events',
    ]) {
      expect(names).toContain(expected);
    }
  });

  it('puts @AcceptsIdempotencyKey() on every POST under /v1 but the Stripe receiver, and nowhere else (§16)', () => {
    // The contract's rule, which the decorators must follow: no path rule in the service.
    const contract = (route: Route) =>
      route.method === 'POST' &&
      route.path.startsWith('/v1/') &&
      route.path.replace(/\/$/, '') !== '/v1/billing/webhooks';
    const wrong = routes.filter((route) => route.acceptsIdempotencyKey !== contract(route));
    expect(wrong.map((route) => route.route)).toEqual([]);
    expect(routes.filter((route) => route.acceptsIdempotencyKey).length).toBeGreaterThanOrEqual(20);
  });

  it('gives every route @Public(), @Scopes() or @UserOnly()', () => {
    const undeclared = routes.filter((route) => !route.public && !route.scope && !route.userOnly);
    expect(undeclared.map((route) => route.route)).toEqual([]);
  });

  it('keeps the contract’s public and user-only routes as such (§3)', () => {
    const rule = (name: string) => routes.find((route) => route.route === name);
    for (const name of [
      'POST /v1/auth/signup',
      'POST /v1/auth/login',
      'POST /v1/auth/forgot-password',
      'POST /v1/auth/reset-password',
      'POST /v1/auth/sso/login',
    ]) {
      expect({ name, public: rule(name)?.public }).toEqual({ name, public: true });
    }
    // The settings of part three are open to the organization's API keys too (§22, §23): a read
    // key reads them; the service asks for admin to change them.
    const settings = /^(GET|PATCH) \/v1\/organizations\/:id\/(safety|limits)$/;
    for (const route of routes.filter((r) => settings.test(r.route))) {
      expect({ route: route.route, scope: route.scope }).toEqual({
        route: route.route,
        scope: 'read',
      });
    }
    for (const route of routes.filter(
      (r) =>
        (r.route.includes(' /v1/me/') ||
          r.route.includes(' /v1/organizations') ||
          r.route.includes(' /v1/invitations')) &&
        !settings.test(r.route),
    )) {
      expect({ route: route.route, userOnly: route.userOnly, public: route.public }).toEqual({
        route: route.route,
        userOnly: true,
        public: false,
      });
    }
    for (const route of routes.filter(
      (r) => r.route.includes(' /v1/api-keys') || r.route.includes(' /v1/audit-events'),
    )) {
      expect({ route: route.route, scope: route.scope }).toEqual({
        route: route.route,
        scope: 'admin',
      });
    }
  });
});
