// Skill revisions end to end: a curator agent proposes over MCP, a reviewer approves in the
// console, and an agent that learns the role afterwards receives the new instructions; the
// proposer of a candidate cannot decide it. Each with JavaScript on and off.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch, newPage, signIn, screenshot, waitHydrated, REVIEWER_PASSWORD,
} from './browser.js';
import { McpClient, createKey } from './mcp.js';

// The `reviewer` console user comes from end2end/run.sh.
const SKILL = 'refund-handling';
let supportKey;
let curatorKey;

before(() => {
  supportKey = createKey('support-e2e', 'support');
  curatorKey = createKey('curator-e2e', 'curation');
});

/** A support agent rates the skill; the curator cites that feedback in a proposal whose
 * instructions carry `marker`. Returns the candidate id. */
async function proposeOverMcp(marker) {
  const support = await new McpClient(supportKey).connect();
  const { sessionId: supportSession } = await support.learnRole('tier-1-support');
  const feedback = await support.tool('feedback_skill', {
    skill: SKILL, rating: 2, session_id: supportSession, comment: `Missing step (${marker}).`,
  });
  assert.equal(feedback.isError, false, feedback.text);
  const feedbackId = feedback.structured.feedback_id;
  assert.match(feedback.text, new RegExp(feedbackId));

  const curator = await new McpClient(curatorKey).connect();
  const { sessionId } = await curator.learnRole('skill-curator');
  const current = await curator.call(sessionId, 'get_skill', { skill: SKILL });
  assert.equal(current.isError, false, current.text);
  const proposed = await curator.call(sessionId, 'propose_skill_revision', {
    skill: SKILL,
    base_version: current.structured.result.version,
    instructions: `${current.structured.result.instructions}\n\n${marker}: read the order id back to the customer before refunding.`,
    note: `Agents asked for the order id check (${marker}).`,
    sources: [feedbackId, supportSession],
    evidence: { pairs: [{ case_id: 'wrong-order', verdict: 'better' }, { case_id: 'happy-path', verdict: 'tie' }] },
  });
  assert.equal(proposed.isError, false, proposed.text);
  assert.equal(proposed.structured.result.verdict, 'ACCEPT');
  return proposed.structured.result.candidate_id;
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`skill revisions with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('a reviewer approves a curator agent\'s candidate and the next agent learns the new instructions', async () => {
      const marker = `E2E-${mode.toUpperCase()}-${Date.now()}`;
      const candidateId = await proposeOverMcp(marker);

      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      const queue = await page.goto('/candidates');
      assert.equal(queue.status(), 200);
      const link = page.locator(`main a[href="/candidates/${candidateId}"]`);
      assert.equal(await link.count(), 1);
      const cells = await link.locator('xpath=ancestor::tr').locator('td').allTextContents();
      assert.match(cells.join(' | '), /refund-handling.*ACCEPT.*pending.*curator-e2e \(agent\)/);
      await screenshot(page, `candidates-queue-${mode}`);

      await page.goto(`/candidates/${candidateId}`);
      if (js) await waitHydrated(page);
      assert.match(await page.textContent('.verdict-summary'), /better 1, tie 1, worse 0/);
      assert.match(await page.textContent('pre.diff'), new RegExp(`\\+ ${marker}`));
      assert.match(await page.getByRole('region', { name: 'Cited sources' }).textContent(), /Missing step/);
      await page.fill('#decide-reason', `Clear improvement (${mode}).`);
      await page.check('input[name=decision][value=approve]');
      if (js) {
        await page.click('button:has-text("Record decision")');
        await page.waitForSelector('text=is now current');
      } else {
        await Promise.all([page.waitForNavigation(), page.click('button:has-text("Record decision")')]);
      }
      await page.goto(`/candidates/${candidateId}`);
      assert.match(await page.textContent('main .lead'), /Status: approved/);
      assert.match(await page.textContent('main'), /Decided by reviewer/);
      await screenshot(page, `candidate-approved-${mode}`);
      if (js) assert.deepEqual(page.hydrationErrors, []);
      await page.context().close();

      const learner = await new McpClient(supportKey).connect();
      const { learned } = await learner.learnRole('tier-1-support');
      assert.match(learned.text, new RegExp(marker));
    });

    it('the proposer of a candidate cannot decide it', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      await page.goto(`/skills/${SKILL}`);
      if (js) await waitHydrated(page);
      const marker = `OWN-${mode}-${Date.now()}`;
      await page.fill('#up-skill-md', `---\nname: ${SKILL}\ndescription: Refunds within policy.\n---\n# Refunds\n\n${marker}`);
      // No sources: the upload is refused until it cites something, and nothing is stored.
      if (js) {
        await page.click('button:has-text("Propose candidate")');
        await page.waitForSelector('text=cite existing feedback, session or pattern IDs');
      } else {
        await Promise.all([page.waitForNavigation(), page.click('button:has-text("Propose candidate")')]);
        await page.goto(`/skills/${SKILL}`);
      }
      const feedbackId = (await page.locator('section[aria-labelledby=skill-feedback] tbody tr td:first-child').first().textContent()).trim();
      await page.fill('#up-skill-md', `---\nname: ${SKILL}\ndescription: Refunds within policy.\n---\n# Refunds\n\n${marker}`);
      await page.fill('#up-provenance', JSON.stringify({ note: 'From the console.', sources: [feedbackId] }));
      if (js) {
        await page.click('button:has-text("Propose candidate")');
        await page.waitForSelector('text=another reviewer decides it');
      } else {
        await Promise.all([page.waitForNavigation(), page.click('button:has-text("Propose candidate")')]);
      }
      await page.goto('/candidates');
      const own = page.locator('main tr', { hasText: 'reviewer (user)' }).locator('a[href^="/candidates/"]');
      assert.equal(await own.count(), 1);
      await own.click();
      await page.waitForSelector('main h1:has-text("Candidate for")');
      assert.match(await page.textContent('main'), /You proposed this candidate, so someone else must decide it/);
      assert.equal(await page.locator('#decide-reason').count(), 0);
      await screenshot(page, `candidate-own-${mode}`);
      await page.context().close();

      // The admin rejects it, so the next mode starts from an empty queue of own proposals.
      const admin = await newPage(browser, false);
      await signIn(admin, 'admin', process.env.SKILLGATE_ADMIN_PASSWORD);
      await admin.goto('/candidates');
      await admin.locator('main tr', { hasText: 'reviewer (user)' }).locator('a[href^="/candidates/"]').click();
      await admin.waitForSelector('#decide-reason');
      await admin.fill('#decide-reason', 'Test upload.');
      await admin.check('input[name=decision][value=reject]');
      await Promise.all([admin.waitForNavigation(), admin.click('button:has-text("Record decision")')]);
      await admin.context().close();
    });
  });
}
