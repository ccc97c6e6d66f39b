// Every console page, reached the way a person reaches it: by clicking through the
// navigation bar and then into the first entry of each list (and its editor), never by
// typing a URL. With JavaScript on each click is a client-side navigation that fetches the
// page's lazy chunk and calls its server functions from the browser; with JavaScript off it
// is a full page load. Either way no page may show "Could not load", an error panel or a
// browser error.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_PASSWORD, expectHeading, launch, navLink, newPage, screenshot, signIn, waitHydrated } from './browser.js';

const SECTIONS = [
  'Roles', 'Skills', 'Tools', 'Upstreams', 'Scopes & keys', 'Connect an agent', 'Sessions',
  'Connected clients', 'API tokens', 'Holds', 'Notifications', 'Candidates', 'Users', 'Audit integrity', 'Dashboard',
];

/**
 * Fails on anything that looks like a page that did not load. (A finding the page reports,
 * such as the broken hash chain compliance.test.js leaves behind, is not a failure to load.)
 */
async function assertNoErrorPanel(page, where) {
  const panels = await page.locator('main .error-panel').allTextContents();
  assert.deepEqual(panels, [], `${where} shows an error panel: ${panels.join(' | ')}`);
  const main = await page.textContent('main');
  assert.ok(!main.includes('Could not load'), `${where}: ${main.slice(0, 300)}`);
  assert.ok(!/not found/i.test(await page.textContent('main h1')), `${where} is a "not found" page`);
  if (page.hydrationErrors) assert.deepEqual(page.hydrationErrors, [], `${where}: browser errors`);
}

/** Clicks a link and waits until its page is the one showing. */
async function follow(page, link, js) {
  const href = await link.getAttribute('href');
  const path = new URL(href, page.url()).pathname;
  const before = await page.textContent('main h1');
  if (js) {
    await link.click();
    await page.waitForURL((u) => u.pathname === path);
    // The lazy chunk renders after the URL changes: wait for the new page's heading.
    await page.waitForFunction(
      (old) => { const h = document.querySelector('main h1'); return h && h.textContent !== old; },
      before,
      { timeout: 15000 },
    ).catch(() => {}); // a page with the same heading as the last one: checked below
  } else {
    await Promise.all([page.waitForURL((u) => u.pathname === path), link.click()]);
  }
  return path;
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`navigating the console with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    let page;
    before(async () => {
      browser = await launch();
      page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      if (js) await waitHydrated(page);
    });
    after(async () => { await browser?.close(); });

    for (const section of SECTIONS) {
      it(`the ${section} link opens its page, and its first entry opens too`, async () => {
        await follow(page, await navLink(page, section), js);
        await expectHeading(page, section);
        await assertNoErrorPanel(page, section);
        if (section === 'Sessions') await screenshot(page, `navigation-sessions-${mode}`);

        // Into the list's first entry, then that entry's editor when it has one.
        const first = page.locator('main table tbody a').first();
        if (await first.count()) {
          const path = await follow(page, first, js);
          await assertNoErrorPanel(page, path);
          const edit = page.locator('main a[href$="/edit"]').first();
          if (await edit.count()) {
            const editPath = await follow(page, edit, js);
            await assertNoErrorPanel(page, editPath);
          }
        }
      });
    }
  });
}

describe('the navigation bar', () => {
  let browser;
  before(async () => { browser = await launch(); });
  after(async () => { await browser?.close(); });

  for (const js of [true, false]) {
    it(`fits on one line at 1280×800 with JavaScript ${js ? 'on' : 'off'}`, async () => {
      const page = await newPage(browser, js);
      await page.setViewportSize({ width: 1280, height: 800 });
      await signIn(page, 'admin', ADMIN_PASSWORD);
      await page.goto('/sessions');
      const nav = page.getByRole('navigation', { name: 'Sections' });
      const tops = await nav.locator(':scope > ul > li').evaluateAll(
        (items) => items.map((li) => Math.round(li.getBoundingClientRect().top)),
      );
      assert.ok(tops.length >= 2, `navigation items: ${tops.length}`);
      assert.equal(new Set(tops).size, 1, `the navigation's items start at ${tops.join(', ')} px`);
      // The whole bar too: brand, navigation and the signed-in user side by side.
      const bar = await page.locator('header.topbar').boundingBox();
      const navBox = await nav.boundingBox();
      assert.ok(bar.height < navBox.height * 2, `the top bar is ${bar.height} px tall`);
      if (js) await screenshot(page, 'navigation-1280');
      await page.context().close();
    });

    it(`marks the current page's group and lists its pages with JavaScript ${js ? 'on' : 'off'}`, async () => {
      const page = await newPage(browser, js);
      await page.setViewportSize({ width: 1280, height: 800 });
      await signIn(page, 'admin', ADMIN_PASSWORD);
      if (js) await waitHydrated(page);
      await (await navLink(page, 'Candidates')).click();
      await expectHeading(page, 'Candidates');
      const nav = page.getByRole('navigation', { name: 'Sections' });
      // The group of the page showing is marked, and only that one.
      assert.deepEqual(
        await nav.locator('summary[aria-current="true"]').allTextContents(),
        ['Review'],
      );
      // Its pages are in view under the bar, the current one marked, without opening a menu.
      const group = page.getByRole('navigation', { name: 'Review pages' });
      await group.waitFor({ state: 'visible' });
      assert.equal(await group.getByRole('link', { name: 'Holds', exact: true }).isVisible(), true);
      assert.equal(
        await group.getByRole('link', { name: 'Candidates', exact: true }).getAttribute('aria-current'),
        'page',
      );
      // A menu that was followed closes (with JavaScript the frame stays, so it must close itself).
      assert.equal(await nav.locator('details[open]').count(), 0);
      // By keyboard: focus a group, open it with Enter, and its links are reachable by Tab.
      const catalog = nav.locator('summary', { hasText: 'Catalog' });
      await catalog.focus();
      await page.keyboard.press('Enter');
      await nav.getByRole('link', { name: 'Roles', exact: true }).waitFor({ state: 'visible' });
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Roles');
      await page.context().close();
    });
  }

  it('shows a loading bar from the click until a lazily loaded page arrives', async () => {
    const page = await newPage(browser, true);
    await signIn(page, 'admin', ADMIN_PASSWORD);
    await waitHydrated(page);
    await expectHeading(page, 'Dashboard');
    // Hold back the page's code: each console page is a wasm chunk fetched on first visit.
    let release;
    const gate = new Promise((resolve) => { release = resolve; });
    let requested;
    const asked = new Promise((resolve) => { requested = resolve; });
    await page.route(/\/pkg\/.*\.(wasm|js)$/, async (route) => {
      requested();
      await gate;
      await route.continue();
    });
    const bar = page.getByRole('progressbar', { name: 'Loading page' });
    assert.equal(await bar.isVisible(), false, 'no loading bar before the click');
    await (await navLink(page, 'Upstreams')).click();
    const deadline = new Promise((_, reject) => {
      setTimeout(() => reject(new Error("the page's chunk was never requested")), 5000);
    });
    await Promise.race([asked, deadline]); // the page's chunk was requested, and is held
    await bar.waitFor({ state: 'visible', timeout: 2000 });
    // The old page still shows while the new one is on its way.
    assert.equal(await page.textContent('main h1'), 'Dashboard');
    release();
    await expectHeading(page, 'Upstreams');
    await bar.waitFor({ state: 'hidden', timeout: 5000 });
    assert.deepEqual(page.hydrationErrors, []);
    await page.context().close();
  });
});
