// call_tool's answers through the official MCP SDKs: a support agent makes calls that are
// refused, held and run. Both SDKs check the structuredContent against the outputSchema
// call_tool publishes (the Python SDK on each successful result, the TypeScript SDK on
// every result it gets) and fail the call when it does not fit, so a run that finishes is
// that check passed on each path; the spec then checks what each answer says.
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BASE } from './browser.js';
import { createKey } from './mcp.js';

const PYTHON = process.env.SKILLGATE_OAUTH_PYTHON;
const CLIENTS = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'sdk_clients');
const CALLS = path.join(CLIENTS, 'answers_calls.json');

function run(command, args) {
  return new Promise((resolve) => {
    execFile(command, args, { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code ?? error.signal) : 0, stdout, stderr });
    });
  });
}

function result(stdout, stderr) {
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
  assert.ok(line, `no RESULT line:\n${stdout}\n${stderr}`);
  return JSON.parse(line.slice('RESULT '.length));
}

// What each call of answers_calls.json must answer, in order.
function assertAnswers(answers) {
  const shown = JSON.stringify(answers, null, 1);
  assert.equal(answers.length, 6, shown);
  const [unchecked, check, over, held, foreign, refund] = answers;
  assert.deepEqual(
    [unchecked.is_error, unchecked.decision, unchecked.code, unchecked.remedy],
    [true, 'denied', 'GOVERNANCE_VIOLATION', 'succeed_first'],
    shown,
  );
  assert.deepEqual(
    [check.is_error, check.decision, check.code, check.has_result],
    [false, 'allowed', 'ALLOWED', true],
    shown,
  );
  assert.deepEqual([over.is_error, over.code, over.remedy], [true, 'GOVERNANCE_VIOLATION', 'argument'], shown);
  assert.deepEqual(
    [held.is_error, held.decision, held.code, held.remedy],
    [true, 'pending_approval', 'APPROVAL_PENDING', 'wait_for_approval'],
    shown,
  );
  assert.match(held.hold_id ?? '', /^hold_/, shown);
  assert.deepEqual([foreign.is_error, foreign.code, foreign.remedy], [true, 'ACCESS_DENIED', null], shown);
  assert.deepEqual([refund.is_error, refund.code, refund.has_result], [false, 'ALLOWED', true], shown);
}

describe("the official MCP SDKs read call_tool's answers against its published outputSchema", () => {
  before(() => {
    assert.ok(PYTHON, 'SKILLGATE_OAUTH_PYTHON names a Python with the mcp SDK (end2end/run.sh sets it)');
  });

  it('the Python SDK accepts every successful result, and each answer says what happened', async () => {
    const key = createKey('sdk-answers-python', 'support');
    const { code, stdout, stderr } = await run(PYTHON, [path.join(CLIENTS, 'answers_client.py'), `${BASE}/mcp`, key, CALLS]);
    assert.equal(code, 0, `the client failed:\n${stderr}`);
    const { output_schema, answers } = result(stdout, stderr);
    assert.equal(output_schema, true);
    assertAnswers(answers);
  });

  it('the TypeScript SDK accepts every answer, refusals included, with nothing on stderr', async () => {
    const key = createKey('sdk-answers-ts', 'support');
    const { code, stdout, stderr } = await run(process.execPath, [path.join(CLIENTS, 'answers_client.mjs'), `${BASE}/mcp`, key, CALLS]);
    assert.equal(code, 0, `the client failed:\n${stderr}`);
    assert.equal(stderr, '');
    const { output_schema, answers } = result(stdout, stderr);
    assert.equal(output_schema, true);
    assertAnswers(answers);
  });
});
