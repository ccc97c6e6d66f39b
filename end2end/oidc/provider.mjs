// A real OpenID provider on loopback for the tests of issue #52: panva's oidc-provider
// (OpenID Certified), configured as a company's identity provider would be.
//
//   node end2end/oidc/provider.mjs CONFIG.json
//
// CONFIG.json:
//   {
//     "resource": "https://gateway.test/mcp",       // the /mcp its access tokens are for
//     "other_resources": ["https://other.test/mcp"], // more it issues tokens for, on request
//     "services": [{ "client_id": "refund-bot", "client_secret": "…", "groups": ["support-agents"] }],
//     "apps": [{ "client_id": "skillgate-console", "client_secret": "…",
//                "redirect_uris": ["http://127.0.0.1:3000/auth/oidc/callback"] }],
//     "accounts": { "alice": { "groups": ["skillgate-admins"], "email": "alice@acme.test" } }
//   }
//
// `services` get access tokens by the client-credentials grant, `apps` sign people in by the
// authorization code flow (the provider's own login and consent pages; any password is
// accepted for an account listed in `accounts`). Access tokens are JWTs for `resource`,
// signed ES256, with the caller's `groups` as a claim; ID tokens carry `groups` too.
//
// It prints one line of JSON, {"issuer": "http://127.0.0.1:PORT"}, once it listens, and
// serves two test controls beside the provider (loopback only, never in a real provider):
//   POST /_test/rotate            a new signing key signs from now on; the old one stays
//                                 published (as a provider rotates)
//   PUT  /_test/accounts/NAME     body {"groups": […]}: the account's groups from now on
//   GET  /_test/stats             {"jwks_fetches": N, "discovery_fetches": N, "kids": […]}

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const accounts = new Map(Object.entries(config.accounts ?? {}));
const serviceGroups = new Map((config.services ?? []).map((s) => [s.client_id, s.groups ?? []]));

let keyCount = 0;
function newKey() {
  keyCount += 1;
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { ...privateKey.export({ format: 'jwk' }), kid: `key-${keyCount}`, alg: 'ES256', use: 'sig' };
}
// Newest first: oidc-provider signs with the first key that fits.
let keys = [newKey()];
let jwksFetches = 0;
let discoveryFetches = 0;
const cookieKeys = [randomBytes(32).toString('hex')];

function groupsOf(token) {
  if (token.accountId) return accounts.get(token.accountId)?.groups ?? [];
  return serviceGroups.get(token.clientId) ?? [];
}

function build(issuer) {
  const provider = new Provider(issuer, {
    clients: [
      ...(config.services ?? []).map((s) => ({
        client_id: s.client_id,
        client_secret: s.client_secret,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        id_token_signed_response_alg: 'ES256',
      })),
      ...(config.apps ?? []).map((a) => ({
        client_id: a.client_id,
        client_secret: a.client_secret,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: a.redirect_uris,
        id_token_signed_response_alg: 'ES256',
      })),
    ],
    jwks: { keys },
    cookies: { keys: cookieKeys },
    // The groups go in every ID token, as a Keycloak group mapper or an Okta groups claim
    // puts them.
    claims: {
      openid: ['sub', 'groups'],
      email: ['email'],
      profile: ['name', 'preferred_username'],
    },
    conformIdTokenClaims: false,
    async findAccount(_ctx, id) {
      const account = accounts.get(id);
      if (!account) return undefined;
      return {
        accountId: id,
        async claims() {
          return {
            sub: id,
            preferred_username: id,
            email: account.email,
            name: account.name ?? id,
            groups: account.groups ?? [],
          };
        },
      };
    },
    async extraTokenClaims(_ctx, token) {
      return { groups: groupsOf(token) };
    },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => config.resource,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, resource) => {
          const known = [config.resource, ...(config.other_resources ?? [])];
          if (!known.includes(resource)) throw new Provider.errors.InvalidTarget();
          return {
            scope: 'mcp:tools',
            audience: resource,
            accessTokenTTL: 600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'ES256' } },
          };
        },
      },
    },
    pkce: { required: () => true },
    ttl: { Session: 3600, Interaction: 600, Grant: 3600, AccessToken: 600, IdToken: 600 },
  });
  provider.on('server_error', (_ctx, error) => console.error('server_error', error));
  return provider;
}

function readBody(request) {
  return new Promise((resolve, reject) => {
    let text = '';
    request.on('data', (chunk) => { text += chunk; });
    request.on('end', () => resolve(text));
    request.on('error', reject);
  });
}

function reply(response, status, body) {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

let provider;
let handler;
function rebuild(issuer) {
  provider = build(issuer);
  handler = provider.callback();
}

const server = createServer(async (request, response) => {
  const url = new URL(request.url, 'http://localhost');
  try {
    if (url.pathname === '/_test/rotate' && request.method === 'POST') {
      keys = [newKey(), ...keys];
      rebuild(provider.issuer);
      return reply(response, 200, { kids: keys.map((k) => k.kid) });
    }
    if (url.pathname.startsWith('/_test/accounts/') && request.method === 'PUT') {
      const name = decodeURIComponent(url.pathname.slice('/_test/accounts/'.length));
      const body = JSON.parse(await readBody(request));
      accounts.set(name, { ...(accounts.get(name) ?? {}), ...body });
      return reply(response, 200, accounts.get(name));
    }
    if (url.pathname === '/_test/stats') {
      return reply(response, 200, {
        jwks_fetches: jwksFetches,
        discovery_fetches: discoveryFetches,
        kids: keys.map((k) => k.kid),
      });
    }
    if (url.pathname === '/jwks') jwksFetches += 1;
    if (url.pathname === '/.well-known/openid-configuration') discoveryFetches += 1;
    return handler(request, response);
  } catch (error) {
    return reply(response, 500, { error: String(error) });
  }
});

server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  rebuild(issuer);
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

// The harness closes stdin (or dies) when it is done: the provider goes with it.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
