// Every console page, reached the way a person reaches it: by clicking through the
// navigation bar and then into the first entry of each list (and its editor), never by
// typing a URL. With JavaScript on each click is a client-side navigation that fetches the
// page's lazy chunk and calls its server functions from the browser; with JavaScript off it
// is a full page load. Either way no page may show "Could not load", an error panel or a
// browser error.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_PASSWORD, expectHeading, launch, newPage, screenshot, signIn, waitHydrated } from './browser.js';

const SECTIONS = [
  'Roles', 'Skills', 'Tools', 'Upstreams', 'Scopes & keys', 'Connect an agent', 'Sessions',
  'Connected clients', 'Holds', 'Candidates', 'Users', 'Dashboard',
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
        const nav = page.getByRole('navigation', { name: 'Sections' });
        await follow(page, nav.getByRole('link', { name: section, exact: true }), js);
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
