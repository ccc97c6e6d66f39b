// OAuth helpers: register a public client and open a pending authorization request over
// HTTP, as an MCP client does before it sends the person's browser to the console.
import crypto from 'node:crypto';
import { BASE } from './browser.js';

/** A PKCE verifier and its S256 challenge (RFC 7636). */
export function pkce() {
  const verifier = crypto.randomBytes(32).toString('base64url');
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
  return { verifier, challenge };
}

/**
 * Registers a public client (RFC 7591) whose redirect URI is `redirectUri`. Returns the
 * registration response, or null when this server has no `/oauth/register` (yet).
 */
export async function registerClient(name, redirectUri) {
  const response = await fetch(`${BASE}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({
      client_name: name,
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: 'none',
    }),
  });
  if (response.status === 404 || response.status === 405) return null;
  if (!response.ok) throw new Error(`registration: HTTP ${response.status} ${await response.text()}`);
  return response.json();
}

/**
 * Starts an authorization request for `client` and returns where the server sends the
 * browser (the console's consent page, `/oauth/consent/<id>`), with the PKCE verifier.
 */
export async function startAuthorization(client, redirectUri, { scope, state = 'x' } = {}) {
  const { verifier, challenge } = pkce();
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: client.client_id,
    redirect_uri: redirectUri,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
  });
  if (scope) query.set('scope', scope);
  const response = await fetch(`${BASE}/oauth/authorize?${query}`, { redirect: 'manual' });
  const location = response.headers.get('location');
  if (response.status < 300 || response.status >= 400 || !location) {
    throw new Error(`authorize: HTTP ${response.status} ${await response.text()}`);
  }
  const url = new URL(location, BASE);
  return { consentPath: `${url.pathname}${url.search}`, verifier };
}
