// API tokens end to end: a reviewer issues a token on the API tokens page (shown once),
// denies a held refund through /api/v1/holds with it, and revokes it on the page, after
// which the API refuses it; an admin sees the reviewer's token among everyone else's.
// With JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  ADMIN_PASSWORD, BASE, REVIEWER_PASSWORD, launch, newPage, screenshot, signIn, submit,
  waitHydrated,
} from './browser.js';
import { McpClient, createKey } from './mcp.js';

let supportKey;

before(() => {
  supportKey = createKey('tokens-e2e', 'support');
});

/** A tier-1 agent's refund of 300, held for a reviewer; returns its hold id. */
async function heldRefund(reason) {
  const agent = await new McpClient(supportKey).connect();
  const { sessionId } = await agent.learnRole('tier-1-support');
  await agent.call(sessionId, 'check_refund_eligibility', { customer_id: 'C-1003', order_id: 'O-5005' });
  const held = await agent.call(sessionId, 'process_refund', {
    customer_id: 'C-1003', order_id: 'O-5005', amount: 300, reason,
  });
  assert.equal(held.structured.code, 'APPROVAL_PENDING', held.text);
  return held.structured.hold_id;
}

async function api(path, token, body) {
  const response = await fetch(`${BASE}/api/v1/holds${path}`, {
    method: body ? 'POST' : 'GET',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, json: await response.json() };
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`API tokens with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('a reviewer issues a token, denies a hold through the API with it, and revokes it', async () => {
      const name = `runbook-${mode}`;
      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      await page.goto('/tokens');
      if (js) await waitHydrated(page);
      // Not an admin: no choice of whose token it is.
      assert.equal(await page.locator('#token-user').count(), 0);
      await page.fill('#token-name', name);
      if (js) {
        await page.click('text="Issue token"');
      } else {
        await Promise.all([page.waitForNavigation(), page.click('text="Issue token"')]);
      }
      const token = (await page.locator('#fresh-token-value').textContent()).trim();
      assert.match(token, /^sgp_[0-9A-Za-z]{43}$/);
      assert.ok((await page.textContent('#fresh-token-example')).includes(token));
      const row = page.getByRole('table', { name: 'Your API tokens' }).getByRole('row').filter({ hasText: name });
      await row.waitFor();
      assert.match(await row.textContent(), new RegExp(`${token.slice(0, 12)}…`));
      await screenshot(page, `tokens-issued-${mode}`);

      // The token is shown once: a fresh visit lists it by its first characters only.
      await page.goto('/tokens');
      if (js) await waitHydrated(page);
      assert.equal(await page.locator('#fresh-token-value').count(), 0);

      const holdId = await heldRefund(`Duplicate (${mode})`);
      const listed = await api('?state=pending', token);
      assert.equal(listed.status, 200, JSON.stringify(listed.json));
      assert.ok(listed.json.holds.some((h) => h.id === holdId));
      const denied = await api(`/${holdId}/deny`, token, { reason: `Already refunded (${mode})` });
      assert.equal(denied.status, 200, JSON.stringify(denied.json));
      assert.equal(denied.json.state, 'denied');
      assert.equal(denied.json.decided_by, 'reviewer');
      const again = await api(`/${holdId}/approve`, token, { reason: 'no' });
      assert.equal(again.status, 409);

      // The hold's page shows the API's decision.
      await page.goto(`/holds/${holdId}`);
      await page.getByText('Denied by reviewer on').waitFor();

      await page.goto('/tokens');
      if (js) await waitHydrated(page);
      const revoked = await submit(page, js, `[aria-label="Revoke API token ${name} of reviewer"]`);
      assert.match(revoked.message, new RegExp(`Revoked the API token “${name}”`));
      const refused = await api('', token);
      assert.equal(refused.status, 401);
      if (js) assert.deepEqual(page.hydrationErrors, []);
      await page.context().close();

      const admin = await newPage(browser, js);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
      await admin.goto('/tokens');
      const theirs = admin.getByRole('table', { name: "Everyone else's API tokens" })
        .getByRole('row').filter({ hasText: name });
      assert.match(await theirs.textContent(), /reviewer/);
      assert.match(await theirs.textContent(), /revoked/);
      await admin.context().close();
    });

    it('a bad token name is refused beside its field and nothing is issued', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      await page.goto('/tokens');
      if (js) await waitHydrated(page);
      await page.fill('#token-name', 'has space');
      if (js) {
        await page.click('text="Issue token"');
      } else {
        await Promise.all([page.waitForNavigation(), page.click('text="Issue token"')]);
      }
      await page.getByText(/token name is 1 to 64 characters/).waitFor();
      assert.equal(await page.locator('#fresh-token-value').count(), 0);
      await page.context().close();
    });
  });
}
