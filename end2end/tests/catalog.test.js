// The read-only catalog pages (roles, skills, tools, scopes & keys) over the demo catalog,
// each with JavaScript on (hydrated wasm) and off (pure server rendering).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch, newPage, signIn, screenshot, waitHydrated, ADMIN_PASSWORD, VIEWER_PASSWORD,
} from './browser.js';

const DEMO_ROLES = ['billing-admin', 'retention-desk', 'security-fraud', 'skill-curator', 'system-admin', 'tier-1-support'];
const FULL_KEY = /sgk_[A-Za-z0-9]{30,}/;

/** The text of each cell in the column headed `header` of the first table under `scope`. */
async function column(scope, header) {
  const table = scope.locator('table').first();
  const headers = await table.locator('thead th').allTextContents();
  const index = headers.indexOf(header);
  assert.notEqual(index, -1, `no column "${header}" in ${headers.join(', ')}`);
  return table.locator(`tbody tr td:nth-child(${index + 1})`).allTextContents();
}

/** The cells of the table row whose first cell reads `first`, keyed by column header. */
async function row(scope, first) {
  const found = await scope.locator('table').first().evaluate((table, wanted) => {
    const headers = [...table.querySelectorAll('thead th')].map((th) => th.textContent.trim());
    const tr = [...table.querySelectorAll('tbody tr')]
      .find((r) => r.querySelector('td')?.textContent.trim() === wanted);
    if (!tr) return null;
    const cells = [...tr.querySelectorAll('td')].map((td) => td.textContent.trim());
    return Object.fromEntries(headers.map((h, i) => [h, cells[i]]));
  }, first);
  assert.ok(found, `no row "${first}"`);
  return found;
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`catalog pages with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('lists the six demo roles with their scopes', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      const response = await page.goto('/roles');
      assert.equal(response.status(), 200);
      assert.equal(await page.textContent('main h1'), 'Roles');
      assert.deepEqual((await column(page.locator('main'), 'Role')).sort(), DEMO_ROLES);
      const tier1 = await row(page.locator('main'), 'tier-1-support');
      assert.equal(tier1.Skills, '3');
      assert.equal(tier1.Limits, '4');
      assert.match(tier1['In scopes'], /support/);
      assert.match(tier1['In scopes'], /billing/);
      if (js) {
        await waitHydrated(page);
        assert.deepEqual(page.hydrationErrors, []);
      }
      await screenshot(page, `catalog-roles-${mode}`);
      await page.context().close();
    });

    it('shows a role with its limit sentences and the tools it grants', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      if (js) {
        // Reached by a link inside the hydrated app: the server function runs over HTTP.
        await page.goto('/roles');
        await waitHydrated(page);
        await page.click('main >> text="tier-1-support"');
        await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Tier 1 support');
        assert.equal(new URL(page.url()).pathname, '/roles/tier-1-support');
      } else {
        const response = await page.goto('/roles/tier-1-support');
        assert.equal(response.status(), 200);
      }
      assert.equal(await page.textContent('main h1'), 'Tier 1 support');
      const limits = await page.getByRole('region', { name: 'Limits', exact: true }).locator('li').allTextContents();
      assert.ok(limits.some((l) => /process_refund/.test(l) && /\b500\b/.test(l)), limits.join(' | '));
      const tools = await page.getByRole('region', { name: 'Tools granted', exact: true }).locator('a').allTextContents();
      assert.ok(tools.includes('process_refund'), tools.join(', '));
      const skills = await page.getByRole('region', { name: 'Skills', exact: true }).locator('a').allTextContents();
      assert.deepEqual(skills, ['customer-lookup', 'refund-handling', 'ticketing-and-escalation']);
      assert.match(await page.getByRole('region', { name: 'Instructions', exact: true }).textContent(), /first person a customer talks to/);
      if (js) assert.deepEqual(page.hydrationErrors, []);
      await screenshot(page, `catalog-role-${mode}`);
      await page.context().close();
    });

    it('lists tools with required and sensitive arguments, and shows a tool\'s schema', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      await page.goto('/tools');
      assert.equal(await page.textContent('main h1'), 'Tools');
      const payment = await row(page.locator('main'), 'update_payment_method');
      assert.match(payment['Sensitive arguments'], /token/);
      assert.match(payment['Sensitive arguments'], /sensitive/);
      assert.match(payment['Required arguments'], /customer_id/);
      assert.match(payment.Roles, /billing-admin/);
      const refund = await row(page.locator('main'), 'process_refund');
      assert.equal(refund['Sensitive arguments'], 'none');
      assert.match(refund.Skills, /refund-handling/);
      await screenshot(page, `catalog-tools-${mode}`);

      const response = await page.goto('/tools/process_refund');
      assert.equal(response.status(), 200);
      assert.equal(await page.textContent('main h1'), 'process_refund');
      const schema = JSON.parse(await page.textContent('main pre'));
      assert.deepEqual(schema.required, ['customer_id', 'order_id', 'amount', 'reason']);
      await screenshot(page, `catalog-tool-${mode}`);
      await page.context().close();
    });

    it('shows a skill with its resource document', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      await page.goto('/skills');
      assert.equal(await page.textContent('main h1'), 'Skills');
      const refund = await row(page.locator('main'), 'refund-handling');
      assert.equal(refund.Version, 'v1');
      assert.match(refund.Resources, /Refund policy/);
      const response = await page.goto('/skills/refund-handling');
      assert.equal(response.status(), 200);
      const resources = page.getByRole('region', { name: 'Resources', exact: true });
      assert.match(await resources.locator('h3').first().textContent(), /Refund policy/);
      await screenshot(page, `catalog-skill-${mode}`);
      await page.context().close();
    });

    it('lists scopes and agent keys by prefix, never a full key', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      await page.goto('/scopes');
      assert.equal(await page.textContent('main h1'), 'Scopes & keys');
      const scopes = page.getByRole('region', { name: 'Scopes', exact: true });
      const support = await row(scopes, 'support');
      assert.match(support.Roles, /tier-1-support/);
      const keys = page.getByRole('region', { name: 'Agent keys', exact: true });
      const demo = await row(keys, 'demo-support');
      assert.equal(demo.Scope, 'support');
      assert.match(demo['Key starts with'], /^sgk_[A-Za-z0-9]{8}…$/);
      assert.match(demo.Status, /active/);
      assert.match(await keys.textContent(), /skillgate key create --name NAME --scope SCOPE/);
      // Neither the visible text nor the HTML (with its hydration data) holds a whole key.
      assert.doesNotMatch(await page.textContent('body'), FULL_KEY);
      assert.doesNotMatch(await page.content(), FULL_KEY);
      await screenshot(page, `catalog-scopes-${mode}`);
      await page.context().close();
    });

    it('answers an unknown role, skill or tool with a not-found notice and status 404', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      for (const [path, heading] of [
        ['/roles/no-such-role', 'Role not found'],
        ['/skills/no-such-skill', 'Skill not found'],
        ['/tools/no_such_tool', 'Tool not found'],
      ]) {
        const response = await page.goto(path);
        assert.equal(response.status(), 404, path);
        assert.equal(await page.textContent('main h1'), heading);
        assert.match(await page.textContent('[role=alert]'), /Not found/);
      }
      await screenshot(page, `catalog-not-found-${mode}`);
      await page.context().close();
    });

    it('lets a viewer read every catalog page', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'viewer', VIEWER_PASSWORD);
      for (const path of ['/roles', '/roles/tier-1-support', '/skills', '/skills/refund-handling', '/tools', '/tools/update_payment_method', '/scopes']) {
        const response = await page.goto(path);
        assert.equal(response.status(), 200, path);
        assert.equal(await page.$('[role=alert]'), null, path);
      }
      assert.match(await page.textContent('main'), /demo-support/);
      await screenshot(page, `catalog-scopes-viewer-${mode}`);
      await page.context().close();
    });
  });
}

describe('catalog pages when signed out', () => {
  it('refuse to render catalog data and send the browser to sign in', async () => {
    const browser = await launch();
    try {
      const page = await newPage(browser, false);
      await page.goto('/roles/tier-1-support');
      assert.equal(new URL(page.url()).pathname, '/login');
      assert.doesNotMatch(await page.content(), /first person a customer talks to/);
    } finally {
      await browser.close();
    }
  });
});
