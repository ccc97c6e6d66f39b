// A spec's own `skillgate serve` on a fresh database in a temporary directory, for specs
// that change the catalog (or serve it from a file) and must not disturb the suite's server.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const BIN = process.env.SKILLGATE_BIN;
const SITE = process.env.SKILLGATE_SITE_ROOT
  ?? path.join(path.dirname(path.dirname(BIN ?? '.')), 'site');

export async function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Starts `skillgate serve ARGS` on a free port (or `options.port`, for a spec that must
 * name the server's address before it starts) and a fresh database; resolves once it
 * listens, with its URL, database URL, directory and the one-time admin password it printed.
 * `stop()` ends it and removes the directory.
 */
export async function startOwnServer(name, args, options = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `skillgate-${name}-`));
  const db = `sqlite://${dir}/${name}.db`;
  const port = options.port ?? await freePort();
  const child = spawn(BIN, ['serve', '--bind', `127.0.0.1:${port}`, '--database-url', db,
    '--site-root', SITE, ...args], { stdio: ['ignore', 'pipe', 'ignore'] });
  // A spec that ends without calling `stop()` (its `before` failed, say) must not leave the
  // server running: it goes when the spec's process exits. A spec killed at its time limit
  // exits without this; end2end/run.sh stops what it left.
  const orphaned = () => {
    child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', orphaned);
  let out = '';
  const adminPassword = await new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the server exited with ${code}: ${out}`)));
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const found = out.match(/^ {2}password: (\S+)$/m);
      if (found && /listening on/.test(out)) resolve(found[1]);
    });
  });
  return {
    base: `http://127.0.0.1:${port}`,
    db,
    dir,
    adminPassword,
    stop() {
      process.removeListener('exit', orphaned);
      orphaned();
    },
  };
}

/** A fresh browser context (no cookies) on `base`. */
export async function newPageOn(browser, base, javaScriptEnabled) {
  const context = await browser.newContext({ javaScriptEnabled, baseURL: base });
  return context.newPage();
}
