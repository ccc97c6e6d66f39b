// The console shell: sign-in, navigation, 404, sign-out and role checks, each with
// JavaScript on (hydrated wasm) and off (pure server rendering).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch, navLink, newPage, signIn, screenshot, waitHydrated, ADMIN_PASSWORD, VIEWER_PASSWORD,
} from './browser.js';

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`console with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('refuses a wrong password with a clear message that does not reveal the user', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'viewer', 'not-the-password');
      assert.match(page.url(), /\/login\?error=invalid$/);
      const wrongPassword = await page.textContent('#login-error');
      await signIn(page, 'nobody-by-this-name', 'whatever-password');
      const unknownUser = await page.textContent('#login-error');
      assert.equal(wrongPassword.trim(), 'Wrong user name or password.');
      assert.equal(unknownUser, wrongPassword);
      await screenshot(page, `login-error-${mode}`);
      await page.context().close();
    });

    it('signs the admin in with the printed password and shows the dashboard', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      assert.equal(new URL(page.url()).pathname, '/');
      assert.equal(await page.textContent('h1'), 'Dashboard');
      assert.match(await page.textContent('.lead'), /Signed in as admin \(admin\)/);
      await screenshot(page, `dashboard-${mode}`);
      await page.context().close();
    });

    it('navigates between sections and shows the 404 page for unknown addresses', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      if (js) {
        await waitHydrated(page);
        // A marker on window survives only if navigation happens in the page (the router
        // is hydrated), not by a full reload.
        await page.evaluate(() => { window.__marker = 'still-here'; });
      }
      for (const [link, heading] of [['Roles', 'Roles'], ['Tools', 'Tools'], ['Users', 'Users'], ['Dashboard', 'Dashboard']]) {
        await (await navLink(page, link)).click();
        await page.waitForFunction((h) => document.querySelector('main h1')?.textContent === h, heading);
        await screenshot(page, `section-${link.toLowerCase()}-${mode}`);
      }
      if (js) {
        assert.equal(await page.evaluate(() => window.__marker), 'still-here');
        assert.deepEqual(page.hydrationErrors, []);
      }
      await (await navLink(page, 'Users')).click();
      await page.waitForSelector('table');
      // Other specs add users of their own; these three come from end2end/run.sh.
      assert.match(await page.textContent('#user-admin th'), /admin \(you\)/);
      assert.match(await page.textContent('#user-viewer th'), /viewer/);
      assert.match(await page.textContent('#user-reviewer th'), /reviewer/);

      const response = await page.goto('/no-such-page');
      assert.equal(response.status(), 404);
      assert.equal(await page.textContent('h1'), 'Page not found');
      await screenshot(page, `not-found-${mode}`);
      await page.context().close();
    });

    it('signs out, after which console pages send the browser to the sign-in page', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'admin', ADMIN_PASSWORD);
      await Promise.all([page.waitForNavigation(), page.click('text="Sign out"')]);
      assert.match(page.url(), /\/login\?signed_out=1$/);
      assert.match(await page.textContent('[role=status]'), /signed out/);
      await page.goto('/users');
      assert.equal(new URL(page.url()).pathname, '/login');
      await page.context().close();
    });

    it('refuses a viewer the admin-only users page, on the server', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'viewer', VIEWER_PASSWORD);
      assert.match(await page.textContent('.lead'), /Signed in as viewer \(viewer\)/);
      const response = await page.goto('/users');
      assert.equal(response.status(), 403);
      assert.match(await page.textContent('[role=alert]'), /needs the admin console role/);
      assert.equal(await page.$('table'), null);
      if (js) {
        // The same refusal reaches the client when it calls the server function itself.
        await waitHydrated(page);
        await (await navLink(page, 'Dashboard')).click();
        await page.waitForFunction(() => document.querySelector('main h1')?.textContent === 'Dashboard');
        await (await navLink(page, 'Users')).click();
        await page.waitForSelector('[role=alert]');
        assert.match(await page.textContent('[role=alert]'), /needs the admin console role/);
      }
      await screenshot(page, `users-forbidden-${mode}`);
      await page.context().close();
    });
  });
}

describe('sign-in throttling', () => {
  it('locks a user name after repeated failures, even for the right password', async () => {
    const browser = await launch();
    try {
      const page = await newPage(browser, false);
      for (let i = 0; i < 5; i += 1) await signIn(page, 'throttled-user', `wrong-${i}`);
      await signIn(page, 'throttled-user', 'wrong-again');
      assert.match(await page.textContent('#login-error'), /Too many failed sign-ins/);
    } finally {
      await browser.close();
    }
  });
});
