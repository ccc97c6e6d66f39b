// The official MCP SDKs close cleanly: the Python and the TypeScript client each connect
// to /mcp with an agent key, list the tools and close, ending their session with
// `DELETE /mcp`; neither may report an error or a warning on the way (the Python SDK logs
// one for any answer to that DELETE but 200, 204 or 405).
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BASE } from './browser.js';
import { createKey } from './mcp.js';

const PYTHON = process.env.SKILLGATE_OAUTH_PYTHON;
const CLIENTS = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'sdk_clients');

function run(command, args) {
  return new Promise((resolve) => {
    execFile(command, args, { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code ?? error.signal) : 0, stdout, stderr });
    });
  });
}

describe('the official MCP SDK clients close without an error', () => {
  let key;
  before(() => {
    assert.ok(PYTHON, 'SKILLGATE_OAUTH_PYTHON names a Python with the mcp SDK (end2end/run.sh sets it)');
    key = createKey('sdk-close-e2e', 'support');
  });

  it('the Python SDK lists the tools and ends its session with no warning, error or traceback', async () => {
    const { code, stdout, stderr } = await run(PYTHON, [path.join(CLIENTS, 'python_client.py'), `${BASE}/mcp`, key]);
    assert.equal(code, 0, `the client failed:\n${stderr}`);
    assert.match(stdout, /^TOOLS [1-9]\d*$/m);
    const lines = stderr.split('\n').filter((line) => line.trim() !== '');
    // Proof that the close path ran: the SDK sent its DELETE.
    assert.ok(lines.some((line) => /DELETE .*\/mcp/.test(line)), `no DELETE /mcp was logged:\n${stderr}`);
    const loud = lines.filter((line) => !/^INFO /.test(line));
    assert.deepEqual(loud, [], `the client logged a warning, an error or a traceback:\n${stderr}`);
  });

  it('the TypeScript SDK lists the tools and terminates its session with nothing on stderr', async () => {
    const { code, stdout, stderr } = await run(process.execPath, [path.join(CLIENTS, 'ts_client.mjs'), `${BASE}/mcp`, key]);
    assert.equal(code, 0, `the client failed:\n${stderr}`);
    assert.match(stdout, /^TOOLS [1-9]\d*$/m);
    assert.match(stdout, /^CLOSED$/m);
    assert.equal(stderr, '');
  });
});
