// The console's half of OAuth sign-in: an admin allows a person OAuth scopes on the Users
// page; a fresh person has no connected clients; and, on a server with the authorization
// endpoints, a client's sign-in goes through the console's sign-in (back to the consent
// page), the consent page names the client, its redirect host and the allowed scope, an
// approval lands on the client with a code and shows on Connected clients, where revoking
// it marks it revoked; a person with no allowed scope can only deny. JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { launch, navLink, newPage, signIn, screenshot, waitHydrated, expectHeading, ADMIN_PASSWORD, outcome, submit } from './browser.js';
import { registerClient, startAuthorization } from './oauth.js';


/**
 * Listens on a loopback redirect URI, as the client's own listener would (a route in the
 * page cannot answer it: Playwright does not intercept the request a redirect leads to),
 * on a port the system picked, so it cannot collide with one in use. Returns the redirect
 * URI and a function that stops listening.
 */
async function actAsClient() {
  const server = http.createServer((_, response) => {
    response.writeHead(200, { 'content-type': 'text/html' });
    response.end('<h1>client</h1>');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    redirect: `http://127.0.0.1:${server.address().port}/callback`,
    stop: () => new Promise((resolve) => server.close(resolve)),
  };
}

async function open(page, js, path) {
  await page.goto(path);
  if (js) await waitHydrated(page);
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`OAuth console pages with JavaScript ${js ? 'on' : 'off'}`, () => {
    const name = `e2e-oauth-${mode}`;
    let browser;
    let admin;
    let password;
    let scope;
    before(async () => {
      browser = await launch();
      admin = await newPage(browser, js);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
    });
    after(async () => { await browser?.close(); });

    it('an admin allows a person an OAuth scope, and it is still allowed after a reload', async () => {
      await open(admin, js, '/users');
      await admin.fill('#new-user-name', name);
      await admin.selectOption('#new-user-role', 'viewer');
      const added = await submit(admin, js, 'text="Add user"');
      assert.match(added.message, new RegExp(`Added \`${name}\` as viewer`));
      password = added.secret;
      await admin.waitForSelector(`#user-${name}`);

      // A fresh user may consent to nothing; the catalog's scopes are offered unticked.
      const boxes = admin.locator(`#user-${name} input[type=checkbox][name^="scopes["]`);
      assert.ok((await boxes.count()) > 0, 'the catalog has scopes to allow');
      for (const box of await boxes.all()) assert.equal(await box.isChecked(), false);
      scope = (await boxes.first().getAttribute('name')).slice('scopes['.length, -1);

      await admin.check(`#user-${name}-scope-${scope}`);
      const saved = await submit(admin, js, `#user-${name} >> text="Save scopes"`);
      assert.equal(saved.message, `Saved the OAuth scopes of \`${name}\`: ${scope}.`);
      await screenshot(admin, `oauth-user-scopes-${mode}`);

      await open(admin, js, '/users');
      assert.equal(await admin.isChecked(`#user-${name}-scope-${scope}`), true);
      const others = await admin.$$eval(
        `#user-${name} input[type=checkbox][name^="scopes["]:checked`, (list) => list.length,
      );
      assert.equal(others, 1);
      if (js) assert.deepEqual(admin.hydrationErrors, []);
    });

    it('the connected clients page lists nothing for a fresh person', async () => {
      const person = await newPage(browser, js);
      await signIn(person, name, password);
      if (js) await waitHydrated(person);
      const link = await navLink(person, 'Connected clients');
      if (js) {
        await link.click();
        await person.waitForURL((u) => u.pathname === '/connected');
      } else {
        await Promise.all([person.waitForURL((u) => u.pathname === '/connected'), link.click()]);
      }
      await expectHeading(person, 'Connected clients');
      await person.waitForSelector('#connected-none');
      // The scope the admin allowed in the test before is named as theirs to give.
      assert.match(await person.textContent('main'), new RegExp(`Scopes you may give a client[^]*${scope}`));
      assert.equal(await person.$('#my-grants'), null);
      // Only an admin sees everyone else's grants.
      assert.equal(await person.$('#all-grants-heading'), null);
      if (js) assert.deepEqual(person.hydrationErrors, []);
      await screenshot(person, `oauth-connected-empty-${mode}`);
      await person.context().close();
    });

    it('a client sign-in: consent names the client and scope, approval shows on Connected clients, revoke ends it', async (t) => {
      const { redirect, stop: stopClient } = await actAsClient();
      t.after(stopClient);
      const client = await registerClient(`E2E client ${mode}`, redirect);
      if (!client) {
        t.skip('this server has no /oauth/register yet');
        return;
      }
      const { consentPath } = await startAuthorization(client, redirect);
      assert.match(consentPath, /^\/oauth\/consent\/[^/]+$/);

      // Signed out, the browser is sent to sign in and comes back to the consent page.
      const person = await newPage(browser, js);
      await person.goto(consentPath);
      assert.equal(new URL(person.url()).pathname, '/login');
      assert.equal(await person.inputValue('input[type=hidden][name=next]'), consentPath);
      await person.fill('#name', name);
      await person.fill('#password', password);
      await Promise.all([person.waitForNavigation(), person.click('button[type=submit]')]);
      assert.equal(new URL(person.url()).pathname, consentPath);
      if (js) await waitHydrated(person);

      assert.equal((await person.textContent('#consent-client-name')).trim(), client.client_name);
      assert.equal((await person.textContent('#consent-client-id')).trim(), client.client_id);
      assert.equal((await person.textContent('#consent-redirect-host')).trim(), new URL(redirect).host);
      assert.equal(await person.isChecked(`input[name=scope][value="${scope}"]`), true);
      assert.equal(await person.locator('input[name=scope]').count(), 1);
      await screenshot(person, `oauth-consent-${mode}`);

      // Approving sends the browser to the client with a code and its state.
      await Promise.all([
        person.waitForURL((u) => u.href.startsWith(redirect)),
        person.click('#consent-approve'),
      ]);
      const back = new URL(person.url());
      assert.ok(back.searchParams.get('code'), `no code in ${back}`);
      assert.equal(back.searchParams.get('state'), 'x');

      // The request was answered: opening it again says so.
      await open(person, js, consentPath);
      await person.waitForSelector('#consent-gone');
      assert.equal(await person.$('#consent-approve'), null);

      // The grant is listed, and revoking it marks it revoked.
      await open(person, js, '/connected');
      const row = person.locator('#my-grants tbody tr').first();
      assert.match(await row.textContent(), new RegExp(client.client_name));
      assert.match(await row.textContent(), new RegExp(scope));
      assert.match(await row.locator('.badge').textContent(), /active/);
      const revoke = row.getByRole('button', { name: `Revoke ${client.client_name} for ${name}` });
      if (js) {
        await revoke.click();
        await person.waitForSelector('#my-grants tr.grant-revoked');
      } else {
        await Promise.all([person.waitForNavigation(), revoke.click()]);
      }
      assert.match(await person.textContent('#form-outcome'), /Revoked/);
      assert.match(await person.locator('#my-grants tbody tr').first().textContent(), /revoked/);
      assert.equal(await person.locator('#my-grants tbody tr').first().getByRole('button').count(), 0);
      await screenshot(person, `oauth-connected-revoked-${mode}`);

      // The admin sees it among everyone else's.
      await open(admin, js, '/connected');
      assert.match(await admin.textContent('#all-grants'), new RegExp(name));

      // The admin may consent to no scope: the consent page offers only Deny, and denying
      // sends the browser back to the client with access_denied.
      const second = await startAuthorization(client, redirect);
      await open(admin, js, second.consentPath);
      await admin.waitForSelector('#consent-no-scope');
      assert.equal(await admin.$('#consent-approve'), null);
      assert.equal(await admin.locator('input[name=scope]').count(), 0);
      await Promise.all([
        admin.waitForURL((u) => u.href.startsWith(redirect)),
        admin.click('#consent-deny'),
      ]);
      assert.equal(new URL(admin.url()).searchParams.get('error'), 'access_denied');
      if (js) assert.deepEqual(person.hydrationErrors, []);
      await person.context().close();
    });
  });
}
