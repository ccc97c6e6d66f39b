// Approvers hear of holds: an admin adds a webhook on the Notifications page (its signing
// secret shown once), a held refund is announced to a receiver on loopback with a valid
// signature and a link to the hold, and the hold's page shows whom it was announced to
// and the session's earlier calls; an admin adds an email notifier whose SMTP password the
// page never shows again. With JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import {
  ADMIN_PASSWORD, REVIEWER_PASSWORD, launch, newPage, screenshot, signIn, submit, waitHydrated,
} from './browser.js';
import { McpClient, createKey } from './mcp.js';

let supportKey;
let receiver;
const received = [];
let arrived = () => {};

before(async () => {
  supportKey = createKey('notify-e2e', 'support');
  receiver = createServer((request, response) => {
    const chunks = [];
    request.on('data', (c) => chunks.push(c));
    request.on('end', () => {
      received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      response.writeHead(200).end('ok');
      arrived();
    });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
});

after(() => receiver?.close());

/** Waits for the receiver's request about `holdId`. */
async function announcementOf(holdId) {
  for (;;) {
    const found = received.find((r) => JSON.parse(r.body).hold?.id === holdId);
    if (found) return found;
    await new Promise((resolve) => { arrived = resolve; });
  }
}

async function heldRefund(reason) {
  const agent = await new McpClient(supportKey).connect();
  const { sessionId } = await agent.learnRole('tier-1-support');
  await agent.call(sessionId, 'check_refund_eligibility', { customer_id: 'C-1003', order_id: 'O-5005' });
  const held = await agent.call(sessionId, 'process_refund', {
    customer_id: 'C-1003', order_id: 'O-5005', amount: 300, reason,
  });
  assert.equal(held.structured.code, 'APPROVAL_PENDING', held.text);
  return held.structured.hold_id;
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`hold notifications with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('an admin adds a webhook, a hold is announced to it signed, and the hold shows who heard', async () => {
      const name = `ops-chat-${mode}`;
      const admin = await newPage(browser, js);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
      await admin.goto('/notifications');
      if (js) await waitHydrated(admin);
      await admin.fill('#notifier-name', name);
      await admin.fill('#notifier-url', `http://127.0.0.1:${receiver.address().port}/hook`);
      await admin.fill('#notifier-scopes', 'support');
      if (js) {
        await admin.click('text="Add webhook"');
      } else {
        await Promise.all([admin.waitForNavigation(), admin.click('text="Add webhook"')]);
      }
      const secret = (await admin.locator('#fresh-notifier-secret').textContent()).trim();
      assert.match(secret, /^whsec_/);
      await admin.locator(`#notifier-${name}`).waitFor();
      await screenshot(admin, `notifications-added-${mode}`);

      const holdId = await heldRefund(`Announced (${mode})`);
      const request = await announcementOf(holdId);
      const expected = `v1=${createHmac('sha256', secret)
        .update(`${request.headers['skillgate-timestamp']}.${request.body}`).digest('hex')}`;
      assert.equal(request.headers['skillgate-signature'], expected);
      const body = JSON.parse(request.body);
      assert.equal(body.type, 'hold.created');
      assert.ok(body.text.includes(`/holds/${holdId}`), body.text);

      // A reviewer sees on the hold's page who heard of it and what the session did before.
      const reviewer = await newPage(browser, js);
      await signIn(reviewer, 'reviewer', REVIEWER_PASSWORD);
      const notified = reviewer.getByRole('list', { name: 'Who was notified' });
      for (;;) {
        await reviewer.goto(`/holds/${holdId}`);
        if (js) await waitHydrated(reviewer);
        if (/delivered/.test(await notified.textContent())) break;
      }
      assert.match(await notified.textContent(), new RegExp(`${name}, that it waits: delivered`));
      const earlier = await reviewer.getByRole('list', { name: "The session's earlier calls" }).textContent();
      assert.match(earlier, /check_refund_eligibility/);
      await screenshot(reviewer, `hold-notified-${mode}`);
      // Reviewers read the page and its log, without the admin's forms.
      await reviewer.goto('/notifications');
      if (js) await waitHydrated(reviewer);
      assert.equal(await reviewer.locator('#notifier-name').count(), 0);
      const log = reviewer.getByRole('table', { name: 'Delivery log' }).getByRole('row').filter({ hasText: holdId });
      assert.match(await log.textContent(), /delivered/);
      if (js) assert.deepEqual(reviewer.hydrationErrors, []);
      await reviewer.context().close();

      const removed = await submit(admin, js, `[aria-label="Remove notifier ${name}"]`);
      assert.match(removed.message, new RegExp(`Removed the notifier “${name}”`));
      assert.equal(await admin.locator(`#notifier-${name}`).count(), 0);
      if (js) assert.deepEqual(admin.hydrationErrors, []);
      await admin.context().close();
    });

    it('an admin adds an email notifier, a bad sender is refused, and its password is never shown', async () => {
      const name = `approvers-mail-${mode}`;
      const password = `smtp-pass-${mode}-7f3a`;
      const admin = await newPage(browser, js);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
      await admin.goto('/notifications');
      if (js) await waitHydrated(admin);
      const fill = async (from) => {
        await admin.fill('#email-name', name);
        await admin.fill('#email-to', 'approvers@example.com, oncall@example.com');
        await admin.fill('#email-from', from);
        await admin.fill('#email-host', '127.0.0.1');
        await admin.selectOption('#email-tls', 'none');
        await admin.fill('#email-port', '2525');
        await admin.fill('#email-username', 'mailer');
        await admin.fill('#email-password', password);
        await admin.fill('#email-scopes', 'support');
      };

      await fill('not-an-address');
      if (js) {
        await admin.click('text="Add email notifier"');
        await admin.locator('#email-from-error').filter({ hasText: 'not an email address' }).waitFor();
      } else {
        const refused = await submit(admin, js, 'text="Add email notifier"');
        assert.match(refused.message, /not an email address/);
      }
      assert.equal(await admin.locator(`#notifier-${name}`).count(), 0, 'nothing was added');

      await fill('skillgate@example.com');
      if (js) {
        await admin.click('text="Add email notifier"');
        await admin.getByText('Email notifier added.').waitFor();
      } else {
        const added = await submit(admin, js, 'text="Add email notifier"');
        assert.match(added.message, new RegExp(`Added the email notifier “${name}”`));
      }
      const row = admin.locator(`#notifier-${name}`);
      await row.waitFor();
      assert.match(await row.textContent(), /email.*approvers@example\.com,oncall@example\.com.*support/);
      await admin.reload();
      if (js) await waitHydrated(admin);
      assert.ok(!(await admin.content()).includes(password), 'the password is never shown');
      await screenshot(admin, `notifications-email-${mode}`);

      await submit(admin, js, `[aria-label="Remove notifier ${name}"]`);
      assert.equal(await admin.locator(`#notifier-${name}`).count(), 0);
      if (js) assert.deepEqual(admin.hydrationErrors, []);
      await admin.context().close();
    });
  });
}
