// Console authoring end to end: an admin builds a scope, a role with two skills and a
// `<= 500` limit, and a key; a real MCP client with that key is held to the limit, and to
// the tightened limit after an edit in the console, without a restart. With JavaScript on
// (hydrated, forms post in the background) and off (plain form posts and redirects).
// It runs its own server on a fresh database, so the catalog it changes is not the one the
// other specs read.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { expectHeading, launch, signIn, screenshot, waitHydrated } from './browser.js';
import { BIN, newPageOn, startOwnServer } from './own_server.js';

const VIEWER_PASSWORD = 'authoring-viewer-password';
let BASE;
let ADMIN_PASSWORD;
let server;

/** Starts `skillgate serve --demo` on a fresh database, with a viewer. */
async function startServer() {
  server = await startOwnServer('authoring', ['--demo']);
  BASE = server.base;
  execFileSync(BIN, ['user', 'add', 'viewer', '--role', 'viewer', '--database-url', server.db],
    { input: `${VIEWER_PASSWORD}\n` });
  return server.adminPassword;
}

/** A fresh browser context (no cookies) on this spec's server. */
async function newPage(browser, javaScriptEnabled) {
  return newPageOn(browser, BASE, javaScriptEnabled);
}

/** A minimal MCP client over streamable HTTP (JSON-RPC in, JSON or SSE out). */
class McpClient {
  constructor(key) { this.key = key; this.session = null; this.nextId = 1; }

  async post(message) {
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${this.key}`,
    };
    if (this.session) headers['mcp-session-id'] = this.session;
    const response = await fetch(`${BASE}/mcp`, { method: 'POST', headers, body: JSON.stringify(message) });
    assert.ok(response.status < 300, `MCP HTTP ${response.status}: ${await response.clone().text()}`);
    this.session = response.headers.get('mcp-session-id') ?? this.session;
    if (message.id === undefined) return null;
    const text = await response.text();
    if ((response.headers.get('content-type') ?? '').includes('text/event-stream')) {
      const messages = text.split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l));
      const reply = messages.find((m) => m.id === message.id);
      assert.ok(reply, `no reply to ${message.method} in ${text}`);
      return reply;
    }
    return JSON.parse(text);
  }

  async request(method, params) {
    const reply = await this.post({ jsonrpc: '2.0', id: this.nextId++, method, params });
    assert.equal(reply.error, undefined, JSON.stringify(reply.error));
    return reply.result;
  }

  async connect() {
    await this.request('initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'authoring-e2e', version: '1' },
    });
    await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
  }

  /** Calls a platform tool; returns its text and structured content. */
  async tool(name, args) {
    const result = await this.request('tools/call', { name, arguments: args });
    const text = result.content.map((c) => c.text ?? '').join('\n');
    return { text, structured: result.structuredContent ?? {}, isError: result.isError === true };
  }
}

/** Submits a form: without JavaScript that is a navigation (post, redirect back). */
async function submit(page, js, button, settled) {
  if (js) {
    await page.click(button);
    await settled();
  } else {
    await Promise.all([page.waitForNavigation(), page.click(button)]);
  }
}

function refund(amount) {
  return { customer_id: 'C-1001', order_id: 'O-5001', amount, reason: 'arrived late' };
}

describe('console authoring', () => {
  before(async () => { ADMIN_PASSWORD = await startServer(); });
  after(() => { server?.stop(); });

  for (const js of [true, false]) {
    const mode = js ? 'js' : 'nojs';
    const role = `clerk-${mode}`;
    const scope = `desk-${mode}`;
    describe(`console authoring with JavaScript ${js ? 'on' : 'off'}`, () => {
      let browser;
      let admin;
      let key;
      let mcp;
      before(async () => {
        browser = await launch();
        admin = await newPage(browser, js);
        await signIn(admin, 'admin', ADMIN_PASSWORD);
      });
      after(async () => { await browser?.close(); });

      async function open(path) {
        const response = await admin.goto(path);
        assert.equal(response.status(), 200, path);
        if (js) await waitHydrated(admin);
      }

      it('an admin creates a role with two skills', async () => {
        await open('/roles/new');
        await screenshot(admin, `authoring-new-role-${mode}`);
        await admin.fill('#role-slug', role);
        await admin.fill('#role-title', `Refund clerk (${mode})`);
        await admin.fill('#role-description', 'Looks customers up and refunds small orders.');
        if (js) {
          assert.match(await admin.textContent('#role-description-count'), /^44 \/ 500/);
        }
        await admin.fill('#role-instructions', '# Refunds\n\nCheck **eligibility** first.');
        await admin.check('#skills-customer-lookup');
        await admin.check('#skills-refund-handling');
        await Promise.all([
          admin.waitForURL(`**/roles/${role}/edit`),
          admin.click('button:has-text("Create role")'),
        ]);
        if (js) await waitHydrated(admin);
        await expectHeading(admin, `Edit role: Refund clerk (${mode})`);
        assert.ok(await admin.isChecked('#skills-refund-handling'));
        assert.match(await admin.innerHTML('.md-preview'), /<strong>eligibility<\/strong>/);
      });

      it('an admin adds a <= 500 limit and sees the sentence an agent reads', async () => {
        await open(`/roles/${role}/edit`);
        await admin.selectOption('#limit-kind', 'bound');
        await admin.selectOption('#limit-tool', 'process_refund');
        await admin.selectOption('#limit-arg', 'amount');
        await admin.selectOption('#limit-op', '<=');
        await admin.fill('#limit-value', '500');
        await submit(admin, js, 'button:has-text("Add limit")',
          () => admin.waitForSelector('.limit-editor .sentence'));
        const sentence = await admin.textContent('.limit-editor .sentence');
        assert.equal(sentence, 'Each call to process_refund must have amount at most 500.');
        await screenshot(admin, `authoring-role-editor-${mode}`);
      });

      it('an invalid limit shows its error next to the field and changes nothing', async () => {
        await open(`/roles/${role}/edit`);
        await admin.selectOption('#limit-kind', 'sum_cap');
        await admin.selectOption('#limit-tool', 'process_refund');
        if (js) {
          // Only the arguments of the chosen tool are offered once JavaScript runs.
          assert.equal(await admin.isVisible('#limit-arg'), true);
        }
        await admin.selectOption('#limit-arg', 'reason');
        await admin.fill('#limit-value', '1000');
        await submit(admin, js, 'button:has-text("Add limit")',
          () => admin.waitForSelector('#arg-error:not([hidden])'));
        assert.match(await admin.textContent('#arg-error'), /`process_refund.reason` is not a number/);
        assert.equal(await admin.locator('.limit-editor .limit').count(), 1);
        await screenshot(admin, `authoring-invalid-limit-${mode}`);
      });

      it('an admin creates a scope that makes the role learnable', async () => {
        await open('/scopes/new');
        await admin.fill('#scope-slug', scope);
        await admin.fill('#scope-description', 'The refund desk.');
        await admin.check(`#roles-${role}`);
        await Promise.all([
          admin.waitForURL(`**/scopes/${scope}`),
          admin.click('button:has-text("Create scope")'),
        ]);
        if (js) await waitHydrated(admin);
        await expectHeading(admin, `Scope: ${scope}`);
        assert.ok(await admin.isChecked(`#roles-${role}`));
        await screenshot(admin, `authoring-scope-editor-${mode}`);
      });

      it('an admin creates a key for the scope and sees it once with a client config', async () => {
        await open('/scopes');
        await admin.fill('#key-name', `bot-${mode}`);
        await admin.selectOption('#key-scope', scope);
        await submit(admin, js, 'button:has-text("Create key")',
          () => admin.waitForSelector('#fresh-key-value'));
        key = (await admin.textContent('#fresh-key-value')).trim();
        assert.match(key, /^sgk_[A-Za-z0-9]{30,}$/);
        const config = JSON.parse(await admin.textContent('#fresh-key-config'));
        assert.equal(config.mcpServers.skillgate.headers.Authorization, `Bearer ${key}`);
        assert.match(config.mcpServers.skillgate.url, /\/mcp$/);
        await screenshot(admin, `authoring-scopes-and-keys-${mode}`);
        await open('/scopes');
        assert.equal(await admin.locator('#fresh-key-value').count(), 0, 'the key is shown only once');
      });

      it('an MCP client with the key learns the role: 600 is refused and 400 allowed', async () => {
        mcp = new McpClient(key);
        await mcp.connect();
        const init = await mcp.tool('init_skilder', { task_summary: 'refund an order' });
        assert.deepEqual(init.structured.roles.map((r) => r.name), [role]);
        const learned = await mcp.tool('learn', { path: `/roles/${role}` });
        assert.equal(learned.isError, false, learned.text);
        assert.match(learned.text, /at most 500/);
        const over = await mcp.tool('call_tool', { tool: 'process_refund', arguments: refund(600) });
        assert.equal(over.structured.code, 'GOVERNANCE_VIOLATION', over.text);
        const under = await mcp.tool('call_tool', { tool: 'process_refund', arguments: refund(400) });
        assert.notEqual(under.structured.decision, 'denied', under.text);
        assert.doesNotMatch(under.text, /ACCESS DENIED|GOVERNANCE VIOLATION/);
      });

      it('editing the limit to 300 makes the next 400 call fail without a restart', async () => {
        await open(`/roles/${role}/edit`);
        await admin.fill('#limit-0-value', '300');
        await submit(admin, js, 'button:has-text("Change")',
          () => admin.waitForFunction(() => /at most 300/.test(document.querySelector('.limit-editor .sentence')?.textContent ?? '')));
        assert.match(await admin.textContent('.limit-editor .sentence'), /at most 300/);
        const again = await mcp.tool('call_tool', { tool: 'process_refund', arguments: refund(400) });
        assert.equal(again.structured.code, 'GOVERNANCE_VIOLATION', again.text);
        assert.match(again.text, /300/);
      });

      it('a guardrail added to the scope binds the session whatever its role allows', async () => {
        await open(`/scopes/${scope}`);
        await admin.selectOption('#limit-kind', 'sum_cap');
        await admin.selectOption('#limit-tool', 'process_refund');
        await admin.selectOption('#limit-arg', 'amount');
        await admin.fill('#limit-value', '450');
        await submit(admin, js, 'button:has-text("Add guardrail")',
          () => admin.waitForSelector('.limit-editor .sentence'));
        assert.match(await admin.textContent('.limit-editor .sentence'), /add up to at most 450/);
        await screenshot(admin, `authoring-guardrail-${mode}`);
        // The 400 refunded earlier in this session counts: 100 more would make 500.
        const over = await mcp.tool('call_tool', { tool: 'process_refund', arguments: refund(100) });
        assert.equal(over.structured.code, 'GOVERNANCE_VIOLATION', over.text);
        assert.equal(over.structured.guardrail_of, scope, over.text);
        assert.match(over.text, /guardrail of scope/);
        const init = await mcp.tool('init_skilder', {});
        assert.match(init.text, /Guardrails of scope/);
      });

      it('a fleet guardrail reads every matching argument of every tool of the scope', async () => {
        await open(`/scopes/${scope}`);
        await admin.selectOption('#limit-kind', 'one_of');
        await admin.fill('#limit-value', 'C-1001, O-5001');
        await admin.fill('#limit-fleet-tools', '*');
        await admin.fill('#limit-fleet-name', '*_id');
        const fleetShown = () => [...document.querySelectorAll('.limit-editor .sentence')]
          .some((e) => /every argument named like/.test(e.textContent));
        await submit(admin, js, 'button:has-text("Add guardrail")',
          () => admin.waitForFunction(fleetShown));
        const sentences = await admin.locator('.limit-editor .sentence').allTextContents();
        assert.ok(sentences.some((t) => /every argument named like \*_id set to one of/.test(t)), sentences.join(' | '));
        // The newest session (the guardrail test's last init) learns the role again.
        const learned = await mcp.tool('learn', { path: `/roles/${role}` });
        assert.equal(learned.isError, false, learned.text);
        const other = await mcp.tool('call_tool', {
          tool: 'process_refund', arguments: { ...refund(1), customer_id: 'C-1002' },
        });
        assert.equal(other.structured.code, 'GOVERNANCE_VIOLATION', other.text);
        assert.match(other.text, /\/customer_id/);
      });

      it('the role change log shows who changed the limit, before and after', async () => {
        await open(`/changes/role/${role}`);
        const entries = await admin.locator('.change').allTextContents();
        assert.ok(entries.length >= 2, entries.join(' | '));
        assert.match(entries[0], /role\.update by admin/);
        assert.match(entries[0], /limits/);
        await screenshot(admin, `authoring-change-log-${mode}`);
      });

      it('an admin registers an upstream, checks health and syncs tools', async () => {
        await open('/upstreams');
        await admin.fill('#upstream-name', `bad-${mode}`);
        await admin.selectOption('#upstream-kind', 'http');
        await admin.fill('#upstream-url', 'ftp://nowhere');
        await submit(admin, js, 'button:has-text("Register and sync")',
          () => admin.waitForSelector('main .notice.error'));
        assert.match(await admin.textContent('main'), /`ftp:\/\/nowhere` is not an http:\/\/ or https:\/\/ URL/);

        // A CA bundle that holds no certificate, and a header the gateway sets itself, are
        // each refused on their own field.
        await open('/upstreams');
        await admin.fill('#upstream-name', `bad-ca-${mode}`);
        await admin.selectOption('#upstream-kind', 'http');
        await admin.fill('#upstream-url', 'https://tools.internal/mcp');
        await admin.fill('#upstream-ca-bundle', 'not a certificate');
        await submit(admin, js, 'button:has-text("Register and sync")',
          () => admin.waitForSelector('#ca-bundle-error:not([hidden])'));
        assert.match(await admin.textContent('#ca-bundle-error'), /CA bundle: no certificate found/);
        await open('/upstreams');
        await admin.fill('#upstream-name', `bad-header-${mode}`);
        await admin.selectOption('#upstream-kind', 'http');
        await admin.fill('#upstream-url', 'https://tools.internal/mcp');
        await admin.fill('#upstream-headers', 'Host: elsewhere.example');
        await submit(admin, js, 'button:has-text("Register and sync")',
          () => admin.waitForSelector('#headers-error:not([hidden])'));
        assert.match(await admin.textContent('#headers-error'), /`Host` is set by the gateway/);

        await open('/upstreams');
        await admin.fill('#upstream-name', `down-${mode}`);
        await admin.selectOption('#upstream-kind', 'http');
        await admin.fill('#upstream-url', 'http://127.0.0.1:9/mcp');
        await admin.fill('#upstream-bearer', `bearer-secret-${mode}`);
        await admin.fill('#upstream-headers', `X-Api-Key: header-secret-${mode}\nX-Tenant: acme`);
        await submit(admin, js, 'button:has-text("Register and sync")',
          () => admin.waitForSelector('.sync-reports'));
        const reports = await admin.locator('.sync-reports li').allTextContents();
        assert.ok(reports.some((r) => r.startsWith(`down-${mode}: sync failed`)), reports.join(' | '));
        assert.ok(reports.some((r) => /^demo: 15 tools listed/.test(r)), reports.join(' | '));

        await admin.click('a[aria-label="Check health of demo"]');
        await admin.waitForSelector('.health');
        assert.match(await admin.textContent('.health'), /demo answered a ping in \d+ ms/);
        // The token is stored and said to be, but never sent back to a browser.
        await open('/upstreams');
        const row = admin.locator('tr', { has: admin.locator(`code:text-is("down-${mode}")`) });
        assert.match(await row.locator('.credentials-cell').textContent(), /bearer token stored/);
        assert.match(await row.locator('.credentials-cell').textContent(), /headers x-api-key, x-tenant/);
        assert.ok(!(await admin.content()).includes(`bearer-secret-${mode}`));
        assert.ok(!(await admin.content()).includes(`header-secret-${mode}`));
        await screenshot(admin, `authoring-upstreams-${mode}`);
      });

      it('a viewer sees the editor but cannot save', async () => {
        const viewer = await newPage(browser, js);
        await signIn(viewer, 'viewer', VIEWER_PASSWORD);
        const response = await viewer.goto(`/roles/${role}/edit`);
        assert.equal(response.status(), 200);
        if (js) await waitHydrated(viewer);
        assert.match(await viewer.textContent('main'), /only an admin can change the catalog/);
        assert.equal(await viewer.isDisabled('button:has-text("Save role")'), true);
        assert.equal(await viewer.isDisabled('button:has-text("Add limit")'), true);
        // Around the disabled form: the server itself refuses the viewer's save. The post
        // carries the page's form token, so it is the role check that refuses it.
        const csrf = await viewer.locator('input[name=csrf_token]').first().getAttribute('value');
        const refused = await viewer.request.post('/console/api/save_role', {
          form: {
            slug: role, revision: '1', title: 'Hijacked', description: '', instructions: 'x',
            csrf_token: csrf,
          },
        });
        assert.equal(refused.status(), 403);
        assert.match(await refused.text(), /admin/);
        await screenshot(viewer, `authoring-viewer-${mode}`);
        await viewer.context().close();
        await open(`/roles/${role}`);
        await expectHeading(admin, `Refund clerk (${mode})`);
      });

      it('a viewer reads the upstreams and checks health, with no form it may not use', async () => {
        const viewer = await newPage(browser, js);
        await signIn(viewer, 'viewer', VIEWER_PASSWORD);
        const response = await viewer.goto('/upstreams');
        assert.equal(response.status(), 200);
        if (js) await waitHydrated(viewer);
        await viewer.waitForSelector('a[aria-label="Check health of demo"]');
        assert.match(await viewer.textContent('main .read-only'), /need the admin role/);
        for (const button of ['Register and sync', 'Sync tools of every upstream', 'Admit the offered identity']) {
          assert.equal(await viewer.locator(`button:has-text("${button}")`).count(), 0, button);
        }
        await viewer.click('a[aria-label="Check health of demo"]');
        await viewer.waitForSelector('.health');
        assert.match(await viewer.textContent('.health'), /demo answered a ping in \d+ ms/);
        await screenshot(viewer, `authoring-upstreams-viewer-${mode}`);
        await viewer.context().close();
      });
    });
  }
});
