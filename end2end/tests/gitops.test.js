// The catalog as code in the console: a server started with `serve --catalog FILE` shows
// every page with a banner naming the file, refuses a catalog change made in the console
// (with JavaScript on and off) and shows an edit of the file without a restart.
// It runs its own server on a fresh database, from the catalog of the suite's server.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expectHeading, launch, signIn, screenshot, waitHydrated } from './browser.js';
import { BIN, newPageOn, startOwnServer } from './own_server.js';

let BASE;
let ADMIN_PASSWORD;
let server;
let workDir;
let catalogFile;

/** Exports the suite server's catalog and serves it from the file on a fresh database. */
async function startServer() {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'skillgate-gitops-file-'));
  catalogFile = path.join(workDir, 'catalog.yaml');
  execFileSync(BIN, ['catalog', 'export', '--output', catalogFile,
    '--database-url', process.env.SKILLGATE_DATABASE_URL]);
  server = await startOwnServer('gitops', ['--catalog', catalogFile]);
  BASE = server.base;
  return server.adminPassword;
}

async function newPage(browser, javaScriptEnabled) {
  return newPageOn(browser, BASE, javaScriptEnabled);
}

describe('a catalog managed as code', () => {
  before(async () => { ADMIN_PASSWORD = await startServer(); });
  after(() => {
    server?.stop();
    if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
  });

  for (const js of [true, false]) {
    const mode = js ? 'js' : 'nojs';
    describe(`with JavaScript ${js ? 'on' : 'off'}`, () => {
      let browser;
      let admin;
      before(async () => {
        browser = await launch();
        admin = await newPage(browser, js);
        await signIn(admin, 'admin', ADMIN_PASSWORD);
      });
      after(async () => { await browser?.close(); });

      async function open(target) {
        const response = await admin.goto(target);
        assert.equal(response.status(), 200, target);
        if (js) await waitHydrated(admin);
      }

      it('every page says the catalog is read-only and names the file', async () => {
        for (const target of ['/', '/roles', '/scopes']) {
          await open(target);
          const banner = admin.getByRole('status', { name: 'Catalog managed as code' });
          assert.match(await banner.textContent(), /Read-only catalog\./);
          assert.ok((await banner.textContent()).includes(catalogFile), target);
        }
        await screenshot(admin, `gitops-banner-${mode}`);
      });

      it('a role made in the console is refused with the reason and not created', async () => {
        const slug = `console-role-${mode}`;
        await open('/roles/new');
        await admin.fill('#role-slug', slug);
        await admin.fill('#role-title', 'Made in the console');
        await admin.fill('#role-description', 'Should never exist.');
        await admin.fill('#role-instructions', 'None.');
        if (js) {
          await admin.click('button:has-text("Create role")');
        } else {
          await Promise.all([admin.waitForNavigation(), admin.click('button:has-text("Create role")')]);
        }
        // The form's own outcome (not the banner, which says the same of the catalog).
        await admin.locator('.notice.error', { hasText: 'managed as code' }).waitFor();
        await screenshot(admin, `gitops-refused-${mode}`);
        await open('/roles');
        assert.equal(await admin.getByText(slug).count(), 0);
      });
    });
  }

  it('an edit of the file shows in the console without a restart', async () => {
    const browser = await launch();
    try {
      const admin = await newPage(browser, false);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
      const text = fs.readFileSync(catalogFile, 'utf8');
      const from = 'description: Customer-facing support agents.';
      assert.ok(text.includes(from), 'the support scope is in the file');
      fs.writeFileSync(catalogFile, text.replace(from, 'description: Edited in git.'));
      const deadline = Date.now() + 15000;
      for (;;) {
        await admin.goto('/scopes/support');
        await expectHeading(admin, 'Scope: support');
        if ((await admin.content()).includes('Edited in git.')) break;
        assert.ok(Date.now() < deadline, 'the edit did not show');
        await new Promise((resolve) => { setTimeout(resolve, 200); });
      }
    } finally {
      await browser.close();
    }
  });
});
