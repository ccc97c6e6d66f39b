// Approval holds end to end: a support agent's refund of 300 is held (the demo's tier-1
// refunds above 200 need a reviewer), a reviewer approves it on the Holds page, and the
// agent's resume runs it exactly once; a viewer reads a hold without forms, and a denied
// hold never runs. Each with JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch, newPage, signIn, screenshot, waitHydrated, REVIEWER_PASSWORD, VIEWER_PASSWORD,
} from './browser.js';
import { McpClient, createKey } from './mcp.js';

// The `reviewer` and `viewer` console users come from end2end/run.sh. A key made with the
// CLI is created by `cli:…`, so the reviewer may decide its holds.
const KEY_NAME = 'holds-e2e';
let supportKey;

before(() => {
  supportKey = createKey(KEY_NAME, 'support');
});

/** An agent learns tier-1 support, checks order O-5005 and asks for a refund of 300.
 * Returns the agent, its session and the hold id. */
async function heldRefund(reason) {
  const agent = await new McpClient(supportKey).connect();
  const { sessionId } = await agent.learnRole('tier-1-support');
  const checked = await agent.call(sessionId, 'check_refund_eligibility', { customer_id: 'C-1003', order_id: 'O-5005' });
  assert.equal(checked.isError, false, checked.text);
  const held = await agent.call(sessionId, 'process_refund', {
    customer_id: 'C-1003', order_id: 'O-5005', amount: 300, reason,
  });
  assert.equal(held.isError, true, `nothing ran, so a hold is an error: ${held.text}`);
  assert.equal(held.structured.code, 'APPROVAL_PENDING');
  assert.match(held.text, /^APPROVAL REQUIRED/);
  assert.equal(held.structured.decision, 'pending_approval');
  const holdId = held.structured.hold_id;
  assert.match(holdId, /^hold_/);
  // Nothing ran: asking where it stands says it waits.
  const polled = await agent.tool('call_tool', { hold_id: holdId, session_id: sessionId, poll: true });
  assert.equal(polled.structured.hold.state, 'pending', polled.text);
  return { agent, sessionId, holdId };
}

/** The row of `holdId` in the queue's table. */
function queueRow(page, holdId) {
  return page.getByRole('table', { name: 'Holds' }).getByRole('row')
    .filter({ has: page.getByRole('link', { name: holdId, exact: true }) });
}

/** Fills a decision form and submits it, with or without JavaScript; waits for `outcome`. */
async function decide(page, js, decision, reason, outcome) {
  const label = decision === 'approve' ? 'Reason for approving (required)' : 'Reason for denying (required)';
  const button = decision === 'approve' ? 'Approve this call' : 'Deny this call';
  await page.getByLabel(label).fill(reason);
  if (js) {
    await page.getByRole('button', { name: button }).click();
  } else {
    await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: button }).click()]);
  }
  await page.getByText(outcome).waitFor();
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`approval holds with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('a reviewer approves a held refund and the agent\'s resume runs it exactly once', async () => {
      const reason = `Premium support not delivered (${mode})`;
      const { agent, sessionId, holdId } = await heldRefund(reason);

      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      const queue = await page.goto('/holds');
      assert.equal(queue.status(), 200);
      const row = queueRow(page, holdId);
      assert.equal(await row.count(), 1);
      const cells = await row.getByRole('cell').allTextContents();
      assert.equal(cells[1].trim(), sessionId);
      assert.equal(cells[2].trim(), KEY_NAME);
      assert.equal(cells[3].trim(), 'tier-1-support');
      assert.equal(cells[4].trim(), 'process_refund');
      assert.match(cells[5], /greater than 200/);
      assert.equal(cells[8].trim(), 'pending');
      assert.equal(await row.getByRole('link', { name: sessionId }).getAttribute('href'), `/sessions/${sessionId}`);
      await screenshot(page, `holds-queue-${mode}`);

      await page.goto(`/holds/${holdId}`);
      if (js) await waitHydrated(page);
      const args = await page.getByRole('region', { name: 'Arguments, exactly as they would run' }).textContent();
      assert.match(args, /amount\s*300/);
      assert.ok(args.includes(reason), args);
      assert.match(await page.getByRole('region', { name: 'Why it was held' }).textContent(), /greater than 200/);
      assert.match(await page.getByRole('region', { name: 'The call' }).textContent(), /Catalog revision/);
      await decide(page, js, 'approve', `Customer verified (${mode}).`, 'Approved: the agent may run');
      // With JavaScript the hold reloads after the outcome arrives: wait for its new state.
      await page.getByText('Approved by reviewer on').waitFor();
      assert.match(await page.textContent('main h1'), /approved/);
      assert.equal(await page.getByLabel('Reason for approving (required)').count(), 0, 'no form once decided');
      await screenshot(page, `hold-approved-${mode}`);
      if (js) assert.deepEqual(page.hydrationErrors, []);

      const ran = await agent.tool('call_tool', { hold_id: holdId, session_id: sessionId });
      assert.equal(ran.isError, false, ran.text);
      assert.equal(ran.structured.result.status, 'processed', ran.text);
      const again = await agent.tool('call_tool', { hold_id: holdId, session_id: sessionId });
      assert.equal(again.isError, true);
      assert.equal(again.structured.code, 'HOLD_USED', again.text);

      await page.goto(`/holds/${holdId}`);
      assert.match(await page.textContent('main h1'), /executed/);
      await page.goto(`/sessions/${sessionId}`);
      const timeline = await page.textContent('main');
      assert.match(timeline, /Held for approval: process_refund/);
      assert.ok(timeline.includes(`Approved by reviewer: Customer verified (${mode}).`), timeline);
      assert.match(timeline, /Approved call process_refund runs/);
      await page.context().close();
    });

    it('a viewer reads a hold without forms, and a hold a reviewer denies never runs', async () => {
      const { agent, sessionId, holdId } = await heldRefund(`Duplicate charge (${mode})`);

      const viewer = await newPage(browser, js);
      await signIn(viewer, 'viewer', VIEWER_PASSWORD);
      const response = await viewer.goto(`/holds/${holdId}`);
      assert.equal(response.status(), 200);
      if (js) await waitHydrated(viewer);
      await viewer.getByText('Deciding needs the reviewer console role').waitFor();
      assert.equal(await viewer.getByLabel('Reason for approving (required)').count(), 0);
      assert.equal(await viewer.getByRole('button', { name: 'Deny this call' }).count(), 0);
      await viewer.context().close();

      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      await page.goto(`/holds/${holdId}`);
      if (js) await waitHydrated(page);
      await decide(page, js, 'deny', `Already refunded (${mode}).`, 'Denied: the call will not run');
      await page.getByText('Denied by reviewer on').waitFor();
      assert.match(await page.textContent('main h1'), /denied/);
      await screenshot(page, `hold-denied-${mode}`);

      await page.goto('/holds');
      assert.equal(await queueRow(page, holdId).count(), 0, 'a denied hold leaves the pending queue');
      await page.goto('/holds?state=denied');
      assert.equal(await queueRow(page, holdId).count(), 1);
      await page.context().close();

      const answer = await agent.tool('call_tool', { hold_id: holdId, session_id: sessionId });
      assert.equal(answer.isError, true);
      assert.equal(answer.structured.code, 'APPROVAL_DENIED', answer.text);
      assert.ok(answer.text.includes(`Already refunded (${mode}).`), answer.text);
    });
  });
}
