// Console user administration: an admin adds a user (the generated password is shown
// once and works), changes their role, disables them (which ends their console session at
// once) and resets their password; with JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, newPage, signIn, screenshot, waitHydrated, ADMIN_PASSWORD, outcome, submit } from './browser.js';


for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`user administration with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('adds, re-roles, disables, re-enables and resets a console user', async () => {
      const name = `e2e-user-${mode}`;
      const admin = await newPage(browser, js);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
      await admin.goto('/users');
      if (js) await waitHydrated(admin);
      // The signed-in admin is offered no control that could lock them out.
      assert.equal(await admin.$('#user-admin select'), null);

      await admin.fill('#new-user-name', name);
      await admin.selectOption('#new-user-role', 'reviewer');
      const added = await submit(admin, js, 'text="Add user"');
      assert.match(added.message, new RegExp(`Added \`${name}\` as reviewer`));
      assert.equal(added.secret.length, 24);
      await admin.waitForSelector(`#user-${name}`);
      await screenshot(admin, `users-added-${mode}`);

      // The new user signs in with the one-time password, as a reviewer.
      const user = await newPage(browser, js);
      await signIn(user, name, added.secret);
      assert.match(await user.textContent('.lead'), new RegExp(`Signed in as ${name} \\(reviewer\\)`));

      // Disabling them ends their console session on the next request.
      await admin.selectOption(`#user-${name}-role`, 'viewer');
      await admin.check(`#user-${name}-disabled`);
      const saved = await submit(admin, js, `#user-${name} >> text="Save"`);
      assert.equal(saved.message, `Saved \`${name}\`: viewer, disabled.`);
      assert.match(await admin.textContent(`#user-${name} th`), /disabled/);
      await user.goto('/roles');
      assert.equal(new URL(user.url()).pathname, '/login');
      await signIn(user, name, added.secret);
      assert.match(user.url(), /error=invalid/);

      // Re-enabled and given a new password: the old one no longer works, the new one does.
      await admin.uncheck(`#user-${name}-disabled`);
      await submit(admin, js, `#user-${name} >> text="Save"`);
      const reset = await submit(admin, js, `#user-${name} >> text="Reset password"`);
      assert.match(reset.message, /shown only once/);
      assert.notEqual(reset.secret, added.secret);
      await signIn(user, name, added.secret);
      assert.match(user.url(), /error=invalid/);
      await signIn(user, name, reset.secret);
      assert.match(await user.textContent('.lead'), new RegExp(`Signed in as ${name} \\(viewer\\)`));
      await screenshot(admin, `users-reset-${mode}`);

      // A bad name is refused with a message, and nobody is added.
      const rows = await admin.$$eval('tbody tr', (trs) => trs.length);
      await admin.fill('#new-user-name', 'has space');
      // The browser's own pattern check would stop the form; the server's is the one tested.
      await admin.$eval('#new-user-name', (e) => e.removeAttribute('pattern'));
      const refused = await submit(admin, js, 'text="Add user"');
      assert.match(refused.message, /user name is 1 to 64 characters/);
      assert.equal(await admin.$$eval('tbody tr', (trs) => trs.length), rows);
      if (js) assert.deepEqual(admin.hydrationErrors, []);
      await admin.context().close();
      await user.context().close();
    });
  });
}
