// Pinned tool definitions over the demo catalog, with JavaScript on and off: the seed
// admitted every demo tool, so none is quarantined and each tool page names its pin.
// (Quarantine itself needs an upstream that changes; server/tests/it/tool_pins.rs drives it.)
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, newPage, signIn, waitHydrated, VIEWER_PASSWORD } from './browser.js';

for (const js of [true, false]) {
  describe(`tool pins with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('shows the demo tools pinned and none quarantined', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'viewer', VIEWER_PASSWORD);
      const list = await page.goto('/tools');
      assert.equal(list.status(), 200);
      assert.equal(await page.getByText(/^quarantined: /).count(), 0);
      const response = await page.goto('/tools/process_refund');
      assert.equal(response.status(), 200);
      const pinned = await page.getByText(/^Pinned definition: SHA-256/).textContent();
      assert.match(pinned, /[0-9a-f]{64}/);
      assert.equal(await page.getByRole('alert').filter({ hasText: 'Quarantined' }).count(), 0);
      assert.equal(await page.getByRole('button', { name: 'Admit the offered definition' }).count(), 0);
      if (js) {
        await waitHydrated(page);
        assert.deepEqual(page.hydrationErrors, []);
      }
      await page.context().close();
    });
  });
}
