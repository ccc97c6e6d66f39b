// Compliance pages over a seeded, chain-valid audit log: a reviewer finds a session with a
// governance violation, reads the rule, downloads the JSONL export; then an event edited
// in the database shows the broken-chain warning. JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import {
  launch, newPage, signIn, screenshot, waitHydrated, REVIEWER_PASSWORD,
} from './browser.js';

// The developer tools' binary beside the server's (`make server` builds both).
const DEV_BIN = process.env.SKILLGATE_BIN.replace(/skillgate$/, 'skillgate-dev');
const DB_URL = process.env.SKILLGATE_DATABASE_URL;
const DB_PATH = DB_URL.replace(/^sqlite:\/\//, '');

/** Runs python3's sqlite3 module on the server's database file (sqlite3 CLI may be absent). */
function sql(statement, ...params) {
  const script = `
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall()
c.commit()
print(json.dumps(rows))`;
  const out = execFileSync('python3', ['-c', script, DB_PATH, statement, JSON.stringify(params)]);
  return JSON.parse(out.toString());
}

let violationSession;

before(() => {
  // A small realistic data set through the real command (run.sh added the reviewer).
  execFileSync(DEV_BIN, ['seed-audit', '--events', '400', '--days', '1', '--database-url', DB_URL]);
});

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`compliance pages with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('a reviewer opens a session with a violation, sees the rule and downloads the JSONL', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      const list = await page.goto('/sessions');
      assert.equal(list.status(), 200);
      if (js) await waitHydrated(page);
      await page.selectOption('#outcome', 'violation');
      await Promise.all([page.waitForURL(/outcome=violation/), page.getByRole('button', { name: 'Filter' }).click()]);
      await page.getByRole('status').filter({ hasText: 'chain verified' }).waitFor();
      const rows = page.locator('table.sessions tbody tr');
      assert.ok((await rows.count()) > 0, 'the seeded data has sessions with a violation');
      assert.match(await rows.first().textContent(), /violation/);
      await screenshot(page, `compliance-sessions-${mode}`);

      const link = rows.first().locator('a').first();
      violationSession = (await link.textContent()).trim();
      await Promise.all([page.waitForURL(/\/sessions\/seed-/), link.click()]);
      assert.equal(await page.textContent('main h1'), `Session ${violationSession}`);
      const violation = page.locator('li.event.tone-violation').first();
      assert.match(await violation.textContent(), /GOVERNANCE_VIOLATION/);
      assert.match(await violation.locator('.rule').textContent(), /^Rule: [a-z_]+$/);
      assert.match(await page.getByRole('status').first().textContent(), /chain verified/);
      if (js) assert.deepEqual(page.hydrationErrors, []);
      await screenshot(page, `compliance-timeline-${mode}`);

      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('link', { name: 'JSONL' }).click(),
      ]);
      assert.equal(download.suggestedFilename(), `skillgate-audit-${violationSession}.jsonl`);
      const lines = readFileSync(await download.path(), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      assert.ok(lines.length >= 3);
      for (const line of lines) {
        assert.equal(line.session_id, violationSession);
        assert.match(line.hash, /^[0-9a-f]{64}$/);
        assert.match(line.prev_hash, /^[0-9a-f]{64}$/);
      }
      assert.ok(lines.some((l) => l.kind === 'call_denied' && l.payload.code === 'GOVERNANCE_VIOLATION'));
      await page.context().close();
    });

    it('a reviewer verifies only what is newer than the newest signed checkpoint', async () => {
      // Signed with the server's own key (beside the database), then five more events.
      execFileSync(process.env.SKILLGATE_BIN, ['audit', '--database-url', DB_URL, 'checkpoint']);
      const [[signed]] = sql('SELECT MAX(seq) FROM audit_checkpoints');
      execFileSync(DEV_BIN, ['seed-audit', '--events', '5', '--days', '1', '--database-url', DB_URL]);
      const [[tip]] = sql('SELECT MAX(seq) FROM audit_events');

      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      await page.goto('/audit');
      if (js) await waitHydrated(page);
      await Promise.all([
        page.waitForURL(/run=since/),
        page.getByRole('button', { name: 'Verify since the newest checkpoint' }).click(),
      ]);
      const status = page.getByRole('status').filter({ hasText: 'chain verified' });
      await status.waitFor();
      const text = await status.textContent();
      // The server signs its own checkpoints every minute too, so the walk may start from a
      // newer one than ours; it always reads exactly the events after where it started.
      const m = text.match(/(\d+) events after the checkpoint of seq (\d+) \(signed at [^)]+\) verify, to tip seq (\d+)/);
      assert.ok(m, text);
      const [events, from, to] = m.slice(1).map(Number);
      assert.ok(from >= signed, `${from} >= ${signed}`);
      assert.equal(from + events, to);
      assert.ok(to >= tip, `${to} >= ${tip}`);
      if (js) assert.deepEqual(page.hydrationErrors, []);
      await page.context().close();
    });
  });
}

describe('a tampered audit event', () => {
  let browser;
  let tampered;
  before(async () => {
    browser = await launch();
    // Someone with write access to the database turns the refusal into an allowance.
    const [[seq]] = sql(
      "SELECT seq FROM audit_events WHERE session_id = ? AND kind = 'call_denied' ORDER BY seq LIMIT 1",
      violationSession,
    );
    tampered = seq;
    sql("UPDATE audit_events SET payload = replace(payload, '\"denied\"', '\"allowed\"') WHERE seq = ?", seq);
  });
  after(async () => { await browser?.close(); });

  for (const js of [true, false]) {
    const mode = js ? 'js' : 'nojs';
    it(`shows the broken-chain warning naming the event (JavaScript ${js ? 'on' : 'off'})`, async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      await page.goto(`/sessions/${violationSession}`);
      const alert = page.getByRole('alert').filter({ hasText: 'Broken hash chain' });
      await alert.waitFor();
      assert.match(await alert.textContent(), new RegExp(`event ${tampered} was changed`));
      if (js) {
        await waitHydrated(page);
        assert.deepEqual(page.hydrationErrors, []);
      }
      await screenshot(page, `compliance-tampered-${mode}`);

      await page.goto('/audit?run=1');
      const full = page.getByRole('alert').filter({ hasText: 'Broken hash chain' });
      await full.waitFor();
      assert.match(await full.textContent(), new RegExp(`event ${tampered} was changed`));
      await screenshot(page, `compliance-audit-${mode}`);
      await page.context().close();
    });
  }
});
