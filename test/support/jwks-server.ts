import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, SignJWT, type CryptoKey } from 'jose';

interface SigningKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export interface IdTokenOptions {
  sub?: string;
  email?: string;
  issuer?: string;
  /** Several: the token's `aud` is their array. */
  audience?: string | string[];
  /** The authorized party: the client the token was issued to. */
  azp?: string;
  /** Seconds from now; negative for an expired token. */
  expiresIn?: number;
  notBefore?: number;
  kid?: string;
  /** Sign with a key the JWKS does not publish (a forgery that names a published kid). */
  forgedWith?: SigningKey;
}

/** A local OIDC provider's JWKS endpoint over real HTTP, and a signer of its id_tokens. */
export class TestOidcProvider {
  readonly keys: SigningKey[] = [];
  jwksRequests = 0;
  private server?: Server;
  baseUrl = '';

  constructor(
    readonly id: string,
    readonly issuer = `https://${id}.idp.example`,
    readonly audience = `personality-api-${id}`,
  ) {}

  static async key(alg: 'RS256' | 'ES256', kid: string): Promise<SigningKey> {
    const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
    const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
    return { kid, alg, privateKey, publicJwk };
  }

  async start(): Promise<this> {
    this.keys.push(await TestOidcProvider.key('RS256', `${this.id}-rsa-1`));
    this.keys.push(await TestOidcProvider.key('ES256', `${this.id}-ec-1`));
    this.server = createServer((request, response) => {
      if (request.url !== '/jwks.json') {
        response.writeHead(404).end();
        return;
      }
      this.jwksRequests++;
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ keys: this.keys.map((key) => key.publicJwk) }));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  get config() {
    return {
      id: this.id,
      issuer: this.issuer,
      audience: this.audience,
      jwks_uri: `${this.baseUrl}/jwks.json`,
    };
  }

  async idToken(options: IdTokenOptions = {}): Promise<string> {
    // An unknown kid is signed with the first key: the verifier must not find it.
    const key = options.forgedWith ?? this.keys.find((k) => k.kid === options.kid) ?? this.keys[0];
    const now = Math.floor(Date.now() / 1000);
    let jwt = new SignJWT({
      ...(options.email === undefined ? {} : { email: options.email }),
      ...(options.azp === undefined ? {} : { azp: options.azp }),
    })
      .setProtectedHeader({ alg: key.alg, kid: options.kid ?? key.kid, typ: 'JWT' })
      .setSubject(options.sub ?? 'subject-1')
      .setIssuer(options.issuer ?? this.issuer)
      .setAudience(options.audience ?? this.audience)
      .setIssuedAt(now)
      .setExpirationTime(now + (options.expiresIn ?? 300));
    if (options.notBefore !== undefined) jwt = jwt.setNotBefore(now + options.notBefore);
    return jwt.sign(key.privateKey);
  }

  stop(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
