// What would change: an admin lowers a limit in the role editor, replays the audited calls
// against the edit before saving it, sees the refund it would have refused grouped by
// rule, role, tool and key, and opens that call in its session's timeline. Nothing is
// saved. The replay needs JavaScript: without it the buttons are not offered and saving
// works as before.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_PASSWORD, launch, newPage, screenshot, signIn, waitHydrated } from './browser.js';
import { McpClient, createKey } from './mcp.js';

const ROLE = 'tier-1-support';
let sessionId;

before(async () => {
  // A refund of 150 in a session of its own key: allowed today (at most 500 per refund).
  const agent = await new McpClient(createKey('whatif-e2e', 'support')).connect();
  ({ sessionId } = await agent.learnRole(ROLE));
  await agent.call(sessionId, 'check_refund_eligibility', { customer_id: 'C-1003', order_id: 'O-5005' });
  const refunded = await agent.call(sessionId, 'process_refund', {
    customer_id: 'C-1003', order_id: 'O-5005', amount: 150, reason: 'What-if e2e',
  });
  assert.equal(refunded.isError, false, refunded.text);
});

describe('what would change', () => {
  let browser;
  before(async () => { browser = await launch(); });
  after(async () => { await browser?.close(); });

  it('lowering the per-refund limit shows the refund it would refuse, links to its session and saves nothing', async () => {
    const admin = await newPage(browser, true);
    await signIn(admin, 'admin', ADMIN_PASSWORD);
    await admin.goto(`/roles/${ROLE}/edit`);
    await waitHydrated(admin);
    const value = admin.locator('#limit-0-value');
    assert.equal(await value.inputValue(), '500');
    await value.fill('100');
    await value.locator('xpath=ancestor::form').locator('button.what-if').click();

    const summary = admin.locator('#what-if-summary');
    await summary.waitFor();
    assert.match(await summary.textContent(), /of the last 7 days decided again: \d+ would change/);
    const ours = admin.getByRole('list', { name: 'Calls that would change' })
      .getByRole('listitem').filter({ hasText: 'by key whatif-e2e' }).first();
    assert.match(await ours.textContent(),
      new RegExp(`allowed → denied: call process_refund by key whatif-e2e under role ${ROLE}`));
    await screenshot(admin, 'whatif-panel');

    // The flipped call opens in its session's timeline, at its event.
    const link = ours.locator(`a[href^="/sessions/${sessionId}#event-"]`);
    const href = await link.getAttribute('href');
    await link.click();
    await admin.waitForURL((url) => url.pathname === `/sessions/${sessionId}`);
    await admin.locator(href.slice(href.indexOf('#'))).waitFor();

    // Nothing was saved: the limit is still 500.
    await admin.goto(`/roles/${ROLE}/edit`);
    await waitHydrated(admin);
    assert.equal(await admin.locator('#limit-0-value').inputValue(), '500');
    assert.deepEqual(admin.hydrationErrors, []);
    await admin.context().close();
  });

  it('without JavaScript the replay buttons and panel are not shown', async () => {
    const admin = await newPage(browser, false);
    await signIn(admin, 'admin', ADMIN_PASSWORD);
    await admin.goto(`/roles/${ROLE}/edit`);
    assert.ok((await admin.locator('button.what-if').count()) > 0);
    assert.equal(await admin.locator('button.what-if:visible').count(), 0);
    assert.equal(await admin.locator('.what-if-panel:visible').count(), 0);
    await admin.context().close();
  });
});
