// A real OAuth client end to end: the official Python MCP SDK's OAuth client connects to
// /mcp knowing only its URL (discovery from the 401, dynamic registration, PKCE), prints
// the authorization URL; Chromium opens it, is sent to the console's sign-in, signs in,
// consents on the consent page, and lands on the client's loopback callback. The client
// then runs a governed call, and the session's timeline names the person and the client.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { BASE, ADMIN_PASSWORD, launch, newPage, screenshot, signIn } from './browser.js';

const BIN = process.env.SKILLGATE_BIN;
const DB = process.env.SKILLGATE_DATABASE_URL;
const PYTHON = process.env.SKILLGATE_OAUTH_PYTHON;
const CLIENT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'oauth_client.py');
const PERSON = 'e2e-oauth-sdk';
const PASSWORD = 'a long password for the sdk person';

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** Starts the SDK client; resolves its `AUTHORIZE` URL and, later, its `RESULT`. */
function startClient(port) {
  const child = spawn(PYTHON, [CLIENT, `${BASE}/mcp`, String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const lines = readline.createInterface({ input: child.stdout });
  let authorize;
  let result;
  const authorizeUrl = new Promise((resolve) => { authorize = resolve; });
  const outcome = new Promise((resolve, reject) => {
    result = resolve;
    child.on('exit', (code) => reject(new Error(`the SDK client exited (${code}) without a result:\n${stderr}`)));
  });
  lines.on('line', (line) => {
    if (line.startsWith('AUTHORIZE ')) authorize(line.slice('AUTHORIZE '.length));
    if (line.startsWith('RESULT ')) result(JSON.parse(line.slice('RESULT '.length)));
  });
  return { child, authorizeUrl, outcome };
}

describe('the Python MCP SDK signs in with OAuth through the console', () => {
  let browser;
  before(async () => {
    assert.ok(PYTHON, 'SKILLGATE_OAUTH_PYTHON names a Python with the mcp SDK (end2end/run.sh sets it)');
    execFileSync(BIN, ['user', 'add', PERSON, '--role', 'viewer', '--database-url', DB], { input: `${PASSWORD}\n` });
    execFileSync(BIN, ['user', 'scopes', PERSON, '--allow', 'support', '--database-url', DB]);
    browser = await launch();
  });
  after(async () => { await browser?.close(); });

  it('knowing only the URL, the client is sent to sign in and consent, then makes a governed call as the person', async () => {
    const port = await freePort();
    const client = startClient(port);
    try {
      const url = await client.authorizeUrl;
      assert.ok(url.startsWith(`${BASE}/oauth/authorize?`), url);
      assert.equal(new URL(url).searchParams.get('code_challenge_method'), 'S256');
      assert.equal(new URL(url).searchParams.get('resource'), `${BASE}/mcp`);

      const page = await newPage(browser, true);
      await page.goto(url);
      // Signed out: the console's sign-in, which comes back to the consent page.
      assert.equal(new URL(page.url()).pathname, '/login');
      await page.fill('#name', PERSON);
      await page.fill('#password', PASSWORD);
      await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
      assert.match(new URL(page.url()).pathname, /^\/oauth\/consent\//);
      await page.waitForSelector('#consent-approve');
      assert.equal((await page.textContent('#consent-client-name')).trim(), 'Python SDK e2e');
      assert.match(await page.textContent('#consent-redirect-host'), new RegExp(`127\\.0\\.0\\.1:${port}`));
      assert.ok(await page.isChecked('input[name=scope][value=support]'));
      await screenshot(page, 'oauth-consent');
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(`http://127.0.0.1:${port}/callback`)),
        page.click('#consent-approve'),
      ]);

      const result = await client.outcome;
      assert.equal(result.learned_error, false);
      assert.equal(result.allowed_error, false, result.allowed_text);
      assert.match(result.allowed_text, /"eligible": true/);
      assert.equal(result.denied_error, true);
      assert.match(result.denied_text, /ACCESS DENIED/);

      // The compliance view of that session names the person and the client.
      const admin = await newPage(browser, false);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
      await admin.goto(`/sessions/${result.session_id}`);
      const timeline = await admin.textContent('main');
      assert.match(timeline, new RegExp(`oauth:${PERSON} via Python SDK e2e`));
      await screenshot(admin, 'oauth-session-timeline');

      // The person sees the client on Connected clients.
      await page.goto(`${BASE}/connected`);
      assert.match(await page.textContent('#my-grants'), /Python SDK e2e/);
    } finally {
      client.child.kill();
    }
  });
});
