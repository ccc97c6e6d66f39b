// Runs the MCP conformance suite's authorization server scenarios against Skillgate's
// authorization server (all in one run: `authorization-code-grant` reads the metadata the
// `authorization-server-metadata-endpoint` scenario fetched), playing the person in
// Chromium: the suite prints an authorization URL and waits for its loopback callback;
// this opens the URL, signs in to the console, approves on the consent page, and the
// browser lands on the suite's callback.
//
// Usage: node conformance_auth.mjs SUITE_JS ISSUER CLIENT_ID CALLBACK_PORT OUTPUT_DIR
// Environment: SKILLGATE_USER, SKILLGATE_PASSWORD (a console user allowed a scope).
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { chromium } from 'playwright-core';

const [suite, issuer, clientId, port, output] = process.argv.slice(2);
const child = spawn(process.execPath, [
  suite, 'authorization', '--url', issuer, '--client-id', clientId, '--port', port, '--resource', `${issuer}/mcp`, '--output-dir', output,
], { stdio: ['ignore', 'pipe', 'inherit'] });

const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code ?? 1)));
const authorizeUrl = new Promise((resolve) => {
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    console.log(line);
    if (line.startsWith(`${issuer}/oauth/authorize?`)) resolve(line.trim());
  });
});

const url = await Promise.race([authorizeUrl, exited.then(() => null)]);
if (url) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
  });
  try {
    const page = await browser.newPage();
    await page.goto(url);
    await page.fill('#name', process.env.SKILLGATE_USER);
    await page.fill('#password', process.env.SKILLGATE_PASSWORD);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await page.waitForSelector('#consent-approve');
    await Promise.all([
      page.waitForURL((u) => u.href.startsWith(`http://127.0.0.1:${port}/callback`)),
      page.click('#consent-approve'),
    ]);
  } catch (error) {
    // The suite would wait five minutes for a callback that is not coming.
    console.error('signing in and consenting in Chromium failed:', error);
    child.kill();
  } finally {
    await browser.close();
  }
}
process.exit(await exited);
