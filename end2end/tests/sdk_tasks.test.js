// A held call waited on as an MCP task by the official TypeScript SDK (its experimental
// tasks, the 2025-11-25 wire): the SDK sees tasks declared and call_tool marked optional,
// asks for a task on its own, and polls it while a reviewer approves the hold on the Holds
// page in a real browser; the result it reads is the refund, run once. A second agent
// cancels its task: the hold is withdrawn and the task's result says so.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BASE, launch, newPage, signIn, waitHydrated, REVIEWER_PASSWORD } from './browser.js';
import { createKey } from './mcp.js';

const CLIENT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'sdk_clients', 'tasks_client.mjs');

/** Runs the client; `onHeld(statusMessage)` is awaited when it prints its HELD line. */
function runClient(key, mode, onHeld) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLIENT, `${BASE}/mcp`, key, mode], { timeout: 90_000 });
    let stdout = '';
    let stderr = '';
    let held = null;
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      // A complete HELD line (followed by its newline), acted on once.
      const line = stdout.split('\n').slice(0, -1).find((l) => l.startsWith('HELD '));
      if (line && held === null) held = onHeld(line.slice('HELD '.length));
    });
    child.stderr.on('data', (chunk) => { stderr += chunk; });
    child.on('error', reject);
    child.on('close', async (code) => {
      try { await held; } catch (error) { reject(error); return; }
      const result = stdout.split('\n').find((l) => l.startsWith('RESULT '));
      if (code !== 0 || !result) {
        reject(new Error(`the client failed (${code}):\n${stdout}\n${stderr}`));
        return;
      }
      resolve({ out: JSON.parse(result.slice('RESULT '.length)), stderr });
    });
  });
}

function holdIn(message) {
  const hold = message.match(/hold_[0-9a-z]+/)?.[0];
  assert.ok(hold, `the task's status message names its hold: ${message}`);
  return hold;
}

describe('the TypeScript SDK waits on a held call as a task', () => {
  let browser;
  before(async () => { browser = await launch(); });
  after(async () => { await browser?.close(); });

  it('a reviewer approves the hold in the console and the SDK reads the refund, run once', async () => {
    const key = createKey('sdk-tasks-approve', 'support');
    let message;
    const { out, stderr } = await runClient(key, 'approve', async (statusMessage) => {
      message = statusMessage;
      const page = await newPage(browser, true);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      await page.goto(`/holds/${holdIn(statusMessage)}`);
      await waitHydrated(page);
      await page.getByLabel('Reason for approving (required)').fill('Customer verified (SDK task).');
      await page.getByRole('button', { name: 'Approve this call' }).click();
      await page.getByText('Approved: the agent may run').waitFor();
      await page.close();
    });
    const shown = JSON.stringify(out, null, 1);
    assert.equal(stderr, '');
    assert.deepEqual(out.server_tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } }, shown);
    assert.equal(out.call_tool_task_support, 'optional', shown);
    assert.equal(out.created_status, 'working', shown);
    assert.match(message, /waits for a reviewer/);
    assert.equal(out.statuses.at(-1), 'completed', shown);
    assert.deepEqual(out.result, { is_error: false, code: 'ALLOWED', related_task: out.task_id }, shown);
    assert.equal(out.error, undefined, shown);
  });

  it('cancelling the task withdraws the hold, and the task lists as cancelled', async () => {
    const key = createKey('sdk-tasks-cancel', 'support');
    const { out, stderr } = await runClient(key, 'cancel', async () => {});
    const shown = JSON.stringify(out, null, 1);
    assert.equal(stderr, '');
    assert.equal(out.cancelled_status, 'cancelled', shown);
    assert.deepEqual(out.listed, [[out.task_id, 'cancelled']], shown);
    assert.deepEqual(out.result, { is_error: true, code: 'HOLD_WITHDRAWN' }, shown);
  });
});
