// The Inspectors page: everyone reads each inspector's threat and default action; an admin
// adds a rule (block injection in one tool's results) and removes it again, adds an external
// hook (a remote plain-http URL is refused first) and removes it; a viewer gets no form.
// With JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch, newPage, signIn, screenshot, waitHydrated, ADMIN_PASSWORD, VIEWER_PASSWORD,
} from './browser.js';

/** The rows of the rules table (the page's second table) as text, one string per row. */
async function ruleRows(page) {
  return page.$$eval('table', (tables) => [...(tables[1]?.querySelectorAll('tbody tr') ?? [])]
    .map((tr) => tr.textContent.replace(/\s+/g, ' ').trim()));
}

/** Clicks `selector`, waiting for the page the form posts to when JavaScript is off. */
async function submit(page, js, selector) {
  if (js) {
    await page.click(selector);
  } else {
    await Promise.all([page.waitForNavigation(), page.click(selector)]);
  }
}

/** Clicks `selector` and waits until the rules table has `rows` rows. */
async function clickUntilRows(page, js, selector, rows) {
  if (js) {
    await page.click(selector);
  } else {
    await Promise.all([page.waitForNavigation(), page.click(selector)]);
  }
  // With no rule left the page shows a notice instead of the rules table. While the rules
  // load again there is neither, so "no table" alone is not "no rules".
  await page.waitForFunction(
    (n) => {
      const table = document.querySelectorAll('table')[1];
      if (n === 0) {
        return !table && /No rules: every inspector takes its default/.test(document.querySelector('main')?.textContent ?? '');
      }
      return table?.querySelectorAll('tbody tr').length === n;
    },
    rows,
  );
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  // Each mode works on its own tool, so the two never see each other's rule.
  const tool = js ? 'lookup_customer' : 'get_order_history';
  describe(`the Inspectors page with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('shows each inspector with its default, and an admin adds and removes a rule', async () => {
      const admin = await newPage(browser, js);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
      await admin.goto('/inspectors');
      if (js) await waitHydrated(admin);
      assert.equal((await admin.textContent('h1')).trim(), 'Inspectors');
      const defaults = await admin.$$eval('table', (tables) => [...tables[0].querySelectorAll('tbody tr')]
        .map((tr) => tr.textContent.replace(/\s+/g, ' ').trim()));
      assert.ok(defaults.some((row) => row.startsWith('secrets') && /redact/.test(row)), defaults.join('\n'));
      assert.ok(defaults.some((row) => row.startsWith('injection') && /flag/.test(row)), defaults.join('\n'));

      const before = (await ruleRows(admin)).length;
      await admin.selectOption('#rule-inspector', 'injection');
      await admin.selectOption('#rule-action', 'block');
      await admin.selectOption('#rule-tool', tool);
      await clickUntilRows(admin, js, 'text="Add rule"', before + 1);
      const added = (await ruleRows(admin)).find((row) => row.includes(tool));
      assert.ok(added, `a rule for ${tool}`);
      assert.match(added, /injection\s*block/);
      await screenshot(admin, `inspectors-rule-${mode}`);

      // The rule is stored: a fresh load shows it.
      await admin.goto('/inspectors');
      assert.ok((await ruleRows(admin)).some((row) => row.includes(tool)));
      if (js) await waitHydrated(admin);

      await clickUntilRows(admin, js, `tbody tr:has-text("${tool}") >> text="Remove"`, before);
      assert.ok(!(await ruleRows(admin)).some((row) => row.includes(tool)));
      if (before === 0) assert.match(await admin.textContent('main'), /No rules: every inspector takes its default/);
      if (js) assert.deepEqual(admin.hydrationErrors, []);
      await admin.context().close();
    });

    it('lets an admin add an external hook, refusing a remote plain-http URL, and remove it', async () => {
      const admin = await newPage(browser, js);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
      await admin.goto('/inspectors');
      if (js) await waitHydrated(admin);
      const name = `scanner-${mode}`;
      const row = `tbody tr:has-text("${name}")`;
      const fill = async (url) => {
        await admin.fill('#hook-name', name);
        await admin.fill('#hook-url', url);
        await admin.fill('#hook-secret-env', 'SKILLGATE_E2E_HOOK_SECRET');
        await admin.check('#hook-stage-result');
      };

      // A remote hook over plain http would send every result in clear: refused, by field.
      await fill('http://hooks.example.com/scan');
      await submit(admin, js, 'text="Add hook"');
      await admin.waitForSelector('#hook-url-error:not([hidden])');
      assert.match(await admin.textContent('#hook-url-error'), /http/i);
      assert.equal(await admin.$(row), null, 'nothing was added');

      await admin.goto('/inspectors');
      if (js) await waitHydrated(admin);
      await fill('http://127.0.0.1:9/scan');
      await submit(admin, js, 'text="Add hook"');
      await admin.waitForSelector(row);
      const added = (await admin.textContent(row)).replace(/\s+/g, ' ');
      assert.match(added, /127\.0\.0\.1:9\/scan/);
      assert.match(added, /result/);
      assert.match(added, /SKILLGATE_E2E_HOOK_SECRET/);
      await screenshot(admin, `inspectors-hook-${mode}`);

      if (js) await waitHydrated(admin);
      await submit(admin, js, `${row} >> text="Remove"`);
      await admin.waitForSelector(row, { state: 'detached' });
      if (js) assert.deepEqual(admin.hydrationErrors, []);
      await admin.context().close();
    });

    it('shows a viewer the policy but no form to change it', async () => {
      const viewer = await newPage(browser, js);
      await signIn(viewer, 'viewer', VIEWER_PASSWORD);
      await viewer.goto('/inspectors');
      assert.equal((await viewer.textContent('h1')).trim(), 'Inspectors');
      assert.equal(await viewer.$('#rule-inspector'), null);
      assert.equal(await viewer.$('text="Add rule"'), null);
      assert.equal(await viewer.$('#hook-name'), null);
      await viewer.context().close();
    });
  });
}
