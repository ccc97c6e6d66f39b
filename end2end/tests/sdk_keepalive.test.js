// The official Python MCP SDK keeps its connection through the OAuth discovery: its HTTP
// client (httpx) sends a body a moment after the headers, and the 401 that starts the OAuth
// flow is answered before the body arrives. The server reads and discards that body, so the
// discovery and registration that follow on the same kept-alive connection are answered
// (before, the connection was closed unannounced and the next request was lost).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOwnServer } from './own_server.js';

const PYTHON = process.env.SKILLGATE_OAUTH_PYTHON;
const CLIENT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'sdk_clients', 'keepalive_client.py');
const ROUNDS = 20;

describe('the Python MCP SDK on one kept-alive connection', () => {
  // Its own server: the suite's server limits client registrations per address, and the
  // other OAuth specs spend that allowance.
  let server;
  before(async () => {
    assert.ok(PYTHON, 'SKILLGATE_OAUTH_PYTHON names a Python with the mcp SDK (end2end/run.sh sets it)');
    server = await startOwnServer('keepalive', ['--demo']);
  });
  after(() => server?.stop());

  it('runs the OAuth discovery after each 401 on the same connection, never losing a request', async () => {
    const stdout = await new Promise((resolve, reject) => {
      execFile(PYTHON, [CLIENT, `${server.base}/mcp`, String(ROUNDS)], { timeout: 120_000 }, (error, out, err) => {
        if (error) reject(new Error(`the client failed (${error.code ?? error.signal}):\n${err}`));
        else resolve(out);
      });
    });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, `no RESULT line:\n${stdout}`);
    const result = JSON.parse(line.slice('RESULT '.length));
    assert.deepEqual(result.errors, []);
    assert.equal(result.reached, ROUNDS, 'every round reached the authorization URL');
    assert.equal(result.connections, 1, 'the whole run used one kept-alive connection');
  });
});
