// Single sign-on to the console through a real OpenID provider (panva's oidc-provider on
// loopback): a person signs in with the provider's button, passes its login and consent
// pages, lands where they were going with the console role their groups give, and is
// refused once the group is removed; the sign-in page keeps the password form for
// break-glass admins. JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { launch, screenshot, waitHydrated, expectHeading } from './browser.js';
import { freePort, newPageOn, startOwnServer } from './own_server.js';
import { startProvider } from './openid.js';

const SECRET = 'console-client-secret-for-the-browser-suite';

/** Goes through the provider's own login and consent pages as `account`. */
async function atProvider(page, account) {
  await page.waitForSelector('input[name=login]');
  await page.fill('input[name=login]', account);
  await page.fill('input[name=password]', 'any password');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  // The consent page, on the first sign-in of this browser.
  if (await page.$('input[name=prompt][value=consent]')) {
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  }
}

describe('single sign-on to the console', () => {
  let provider;
  let server;
  let browser;
  before(async () => {
    const port = await freePort();
    provider = await startProvider({
      resource: `http://127.0.0.1:${port}/mcp`,
      apps: [{
        client_id: 'skillgate-console',
        client_secret: SECRET,
        redirect_uris: [`http://127.0.0.1:${port}/auth/sso/callback`],
      }],
      accounts: {
        'sso-js': { groups: ['skillgate-reviewers'] },
        'sso-nojs': { groups: ['skillgate-reviewers'] },
      },
    });
    const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'skillgate-sso-'));
    const secret = path.join(dir, 'secret');
    fs.writeFileSync(secret, SECRET);
    const file = path.join(dir, 'console-sso.yaml');
    fs.writeFileSync(file, [
      `issuer: ${provider.issuer}`,
      'client_id: skillgate-console',
      `client_secret_file: ${secret}`,
      'algorithms: [ES256]',
      'label: Sign in with Acme',
      'roles:',
      '  - { group: skillgate-admins, role: admin }',
      '  - { group: skillgate-reviewers, role: reviewer }',
      '',
    ].join('\n'));
    server = await startOwnServer('sso', ['--console-sso', file], { port });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    server?.stop();
    provider?.stop();
  });

  for (const js of [true, false]) {
    const account = js ? 'sso-js' : 'sso-nojs';
    it(`with JavaScript ${js ? 'on' : 'off'}, a person signs in with the provider's button and lands with their groups' role, and is refused once the group is removed`, async () => {
      const page = await newPageOn(browser, server.base, js);
      // A signed-out visit to a page goes to the sign-in page, which offers the provider
      // and, for break-glass admins, the password form.
      await page.goto('/holds');
      assert.match(page.url(), /\/login\?next=%2Fholds$/);
      if (js) await waitHydrated(page);
      assert.equal((await page.textContent('#sso-sign-in')).trim(), 'Sign in with Acme');
      assert.ok(await page.$('#break-glass'), 'the password form says it is for break-glass admins');
      await screenshot(page, `sso-login-${js ? 'js' : 'nojs'}`);

      await Promise.all([page.waitForNavigation(), page.click('#sso-sign-in')]);
      assert.ok(page.url().startsWith(provider.issuer), page.url());
      await atProvider(page, account);
      // Back in the console, on the page that sent the browser to sign in.
      await page.waitForURL(`${server.base}/holds`);
      if (js) await waitHydrated(page);
      await expectHeading(page, 'Holds');
      assert.equal((await page.textContent('.who-name')).trim(), account);
      assert.equal((await page.textContent('.who .badge')).trim(), 'reviewer');

      // Signed out, and out of the group at the provider: the next sign-in is refused.
      await Promise.all([page.waitForNavigation(), page.click('.who button[type=submit]')]);
      await provider.setGroups(account, ['staff']);
      await page.goto('/login');
      await Promise.all([page.waitForNavigation(), page.click('#sso-sign-in')]);
      // The provider remembers the person: straight back, or through its login page.
      if (page.url().startsWith(provider.issuer)) await atProvider(page, account);
      await page.waitForURL(/\/login\?error=sso&code=no_role$/);
      assert.match(await page.textContent('#login-error'), /no group that gives a console role/);
      const signedIn = await page.$('.who-name');
      assert.equal(signedIn, null, 'nobody is signed in');
      await page.context().close();
    });
  }
});
