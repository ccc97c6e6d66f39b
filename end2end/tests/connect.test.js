// Connect an agent, end to end: the page reached from the navigation shows each MCP
// client's configuration for a chosen key with the server's real /mcp URL and no secret;
// an admin's try-it runs init_skilder, learn and call_tool through the gateway and sees
// exactly what an agent of the scope gets over MCP, audited as the admin; a viewer gets
// the configurations but no try-it. Each with JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  BASE, launch, navLink, newPage, signIn, screenshot, waitHydrated, ADMIN_PASSWORD, VIEWER_PASSWORD,
} from './browser.js';
import { McpClient, createKey } from './mcp.js';

const CLIENTS = ['Claude Desktop', 'Claude Code', 'VS Code', 'Cursor', 'Python (MCP SDK)', 'TypeScript (MCP SDK)'];
let keys;

before(() => {
  keys = { js: createKey('connect-e2e-js', 'support'), nojs: createKey('connect-e2e-nojs', 'support') };
});

/** Clicks a submit button: with JavaScript an ActionForm posts in the background, without
 * it the browser navigates; either way waits until `ready` is visible. */
async function submit(page, js, button, ready) {
  if (js) {
    await page.getByRole('button', { name: button }).click();
  } else {
    await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: button }).click()]);
  }
  await ready.waitFor();
}

/** The text of the newest try-it step of `tool`. */
async function lastStepText(page, tool) {
  const step = page.locator(`li.try-step[data-tool="${tool}"]`).last();
  return (await step.locator('pre.try-text').allTextContents()).join('\n');
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`connect an agent with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('shows every client\'s configuration for the chosen key, with the real /mcp URL and no secret', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      if (js) await waitHydrated(page);
      await (await navLink(page, 'Connect an agent')).click();
      await page.getByRole('heading', { name: 'Connect an agent', level: 1 }).waitFor();
      assert.ok(page.url().endsWith('/connect'), page.url());

      await page.getByLabel('Agent key', { exact: true }).selectOption(`connect-e2e-${mode}`);
      await Promise.all([
        page.waitForURL(`**/connect?key=connect-e2e-${mode}`),
        page.getByRole('form', { name: 'Choose an agent key' }).getByRole('button', { name: 'Show configurations' }).click(),
      ]);
      const url = `${BASE}/mcp`;
      assert.equal((await page.locator('code.mcp-url').textContent()).trim(), url);
      // Without a key: the URL alone, for clients that sign in with OAuth.
      const oauth = JSON.parse(await page.locator('#connect-oauth-config').textContent());
      assert.deepEqual(oauth, { mcpServers: { skillgate: { type: 'http', url } } });
      for (const client of CLIENTS) {
        const text = await page.getByRole('region', { name: client }).textContent();
        assert.ok(text.includes(url), `${client} names ${url}: ${text}`);
        assert.ok(text.includes('<YOUR SKILLGATE KEY>'), `${client}: ${text}`);
      }
      const html = await page.content();
      assert.ok(!html.includes(keys[mode]), 'no key secret anywhere in the page');
      assert.ok(html.includes(keys[mode].slice(0, 12)), 'the key\'s prefix is named');
      assert.match(await page.locator('.secret-source').textContent(), /shows each one only once/);
      await screenshot(page, `connect-${mode}`);
      if (js) assert.deepEqual(page.hydrationErrors, []);
      await page.context().close();
    });

    it('an admin\'s try-it gets exactly what an agent of the scope gets, audited as the admin', async () => {
      const agent = await new McpClient(keys[mode]).connect();
      const { sessionId: agentSession, learned } = await agent.learnRole('tier-1-support');
      const looked = await agent.call(agentSession, 'lookup_customer', { customer_id: 'C-1001' });
      assert.equal(looked.isError, false, looked.text);
      const denied = await agent.call(agentSession, 'delete_user_account', { user_id: 'U-2001', confirm: true });
      assert.match(denied.text, /^ACCESS DENIED/);

      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      await page.goto('/connect?scope=support');
      if (js) await waitHydrated(page);
      await page.locator('#try-scope').selectOption('support');
      await submit(page, js, '1. Run init_skilder', page.locator('li.try-step[data-tool="init_skilder"]'));
      const sessionId = (await page.locator('.try-session code').textContent()).trim();
      assert.match(sessionId, /^ses_/);
      assert.match(await lastStepText(page, 'init_skilder'), /started \(scope: support\)/);

      await page.getByLabel('Learn path').fill('/roles/tier-1-support');
      await submit(page, js, '2. Run learn', page.locator('li.try-step[data-tool="learn"]'));
      assert.equal(await lastStepText(page, 'learn'), learned.text, 'learn reads as it does for the agent');

      await page.getByLabel('Tool', { exact: true }).fill('lookup_customer');
      await page.getByLabel('Arguments (JSON)').fill('{"customer_id": "C-1001"}');
      await submit(page, js, '3. Run call_tool', page.locator('li.try-step[data-tool="call_tool"]'));
      assert.equal(await lastStepText(page, 'call_tool'), looked.text, 'the upstream\'s answer, unchanged');

      await page.getByLabel('Tool', { exact: true }).fill('delete_user_account');
      await page.getByLabel('Arguments (JSON)').fill('{"user_id": "U-2001", "confirm": true}');
      await submit(page, js, '3. Run call_tool', page.locator('li.try-step[data-tool="call_tool"]').nth(1));
      assert.equal(await lastStepText(page, 'call_tool'), denied.text);
      assert.match(await page.locator('.try-actor').textContent(), /console:admin/);
      await screenshot(page, `connect-try-it-${mode}`);
      if (js) assert.deepEqual(page.hydrationErrors, []);

      await page.goto(`/sessions/${sessionId}`);
      const timeline = await page.textContent('main');
      assert.ok(timeline.includes('console:admin'), timeline);
      assert.ok(timeline.includes('delete_user_account'), timeline);
      await page.context().close();
    });

    it('a viewer gets the configurations but no try-it', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'viewer', VIEWER_PASSWORD);
      const response = await page.goto('/connect?scope=support');
      assert.equal(response.status(), 200);
      if (js) await waitHydrated(page);
      await page.getByRole('region', { name: 'Cursor' }).waitFor();
      await page.getByText('Trying calls needs the admin console role').waitFor();
      assert.equal(await page.getByRole('button', { name: '1. Run init_skilder' }).count(), 0);
      await page.context().close();
    });
  });
}
