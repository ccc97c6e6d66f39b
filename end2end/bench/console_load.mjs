// How long a cold browser takes to make a console page work: from navigation until the
// wasm bundle has hydrated the page (`window.__skillgate_hydrated`), with an empty cache,
// on loopback and on an emulated remote link. Counts the bundle's requests and the bytes
// they moved. Run by `end2end/run.sh bench/console_load.mjs` against any build
// (SKILLGATE_BIN, SKILLGATE_SITE_ROOT); BENCHMARKS.md, "The console's main module".
import { BASE, ADMIN_PASSWORD, launch, signIn } from '../tests/browser.js';

const RUNS = Number(process.env.RUNS ?? 7);
// A link to a console across a country: 40 ms round trip, 20 Mbit/s down, 5 up.
const LINKS = [
  { name: 'loopback', conditions: null },
  {
    name: '40 ms, 20 Mbit/s',
    conditions: { offline: false, latency: 40, downloadThroughput: 2.5e6, uploadThroughput: 6.25e5 },
  },
];

// The server names every bundle module a page needs in its <head> (app/src/preload.rs).
// "removed" takes those hints out of the page before the browser reads it, to measure what
// they are worth in the same run; both variants get the page through the same interception,
// which fetches the HTML outside the emulated link (only the bundle's requests cross it).
const HINTS = process.env.HINTS === 'sent' ? [true] : [true, false];
const CHUNK_HINT = /<link[^>]*href="\/pkg\/(?:chunk_|split_|__wasm_split)[^"]*"[^>]*>/g;

// One load of `target` in a fresh context (empty cache) over `link`: the time from
// navigation until the page works, or why it never did within 20 s.
async function coldLoad(link, target, hints) {
  const context = await browser.newContext({ baseURL: BASE, storageState: target.state });
  try {
    const pagePath = new URL(target.path, BASE).pathname;
    await context.route((url) => url.pathname === pagePath, async (route) => {
      const response = await route.fetch();
      const body = await response.text();
      await route.fulfill({ response, body: hints ? body : body.replace(CHUNK_HINT, '') });
    });
    const tab = await context.newPage();
    const cdp = await context.newCDPSession(tab);
    await cdp.send('Network.enable');
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    if (link.conditions) await cdp.send('Network.emulateNetworkConditions', link.conditions);
    const bundle = new Map();
    const refused = [];
    const answered = new Set();
    cdp.on('Network.responseReceived', (e) => {
      if (!e.response.url.includes('/pkg/')) return;
      answered.add(e.requestId);
      bundle.set(e.requestId, 0);
      if (e.response.status !== 200) refused.push(`${e.response.status} ${e.response.url}`);
    });
    const pending = new Map();
    cdp.on('Network.requestWillBeSent', (e) => {
      if (e.request.url.includes('/pkg/')) pending.set(e.requestId, e.request.url);
    });
    cdp.on('Network.loadingFinished', (e) => {
      pending.delete(e.requestId);
      if (bundle.has(e.requestId)) bundle.set(e.requestId, e.encodedDataLength);
    });
    cdp.on('Network.loadingFailed', (e) => {
      if (pending.has(e.requestId)) refused.push(`${e.errorText} ${pending.get(e.requestId)}`);
      pending.delete(e.requestId);
    });
    const consoleErrors = [];
    tab.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    tab.on('pageerror', (e) => consoleErrors.push(String(e)));
    const start = performance.now();
    const answer = await tab.goto(target.path, { waitUntil: 'commit' });
    if (!answer.ok()) throw new Error(`${target.path}: HTTP ${answer.status()}`);
    try {
      await tab.waitForFunction(() => window.__skillgate_hydrated === true, null, { timeout: 20000 });
    } catch {
      // Counted, not fatal: the table says how often a page never came alive, and why:
      // whether the browser got headers for what it waits on, and whether the server
      // still answers that first request from outside the browser.
      const firstUrl = [...pending.values()][0];
      const headersFor = [...pending.keys()].filter((id) => answered.has(id)).length;
      let server = 'not asked';
      if (firstUrl) {
        const asked = performance.now();
        try {
          const r = await fetch(firstUrl, { signal: AbortSignal.timeout(5000) });
          await r.arrayBuffer();
          server = `answers it with ${r.status} in ${(performance.now() - asked).toFixed(0)} ms`;
        } catch (e) {
          server = `does not answer it (${e.name})`;
        }
      }
      return { hung: `${refused.length} refused, ${pending.size} unfinished (first ${firstUrl ?? 'none'}, headers received for ${headersFor} of them), the server ${server}, ${consoleErrors[0] ?? 'no console error'}` };
    }
    const ms = performance.now() - start;
    return {
      ms,
      requests: bundle.size,
      bytes: [...bundle.values()].reduce((a, b) => a + b, 0),
    };
  } finally {
    await context.close();
  }
}

const browser = await launch();
try {
  const signedIn = await browser.newContext({ baseURL: BASE });
  const page = await signedIn.newPage();
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/roles');
  const edit = await page.evaluate(() =>
    [...document.querySelectorAll('a[href^="/roles/"]')]
      .map((a) => a.getAttribute('href'))
      .find((h) => /^\/roles\/[^/]+$/.test(h) && h !== '/roles/new'));
  const cookies = await signedIn.storageState();
  await signedIn.close();

  const pages = [
    { path: '/login', state: undefined },
    { path: '/', state: cookies },
    { path: '/roles', state: cookies },
    { path: `${edit}/edit`, state: cookies },
  ];
  console.log(`| link | page | preload hints | median ms | min | max | not alive in 20 s (of ${RUNS}) | wasm+js requests | KB moved |`);
  console.log('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const link of LINKS) {
    for (const target of pages) {
      // The two variants alternate load by load, so a slower stretch of the machine
      // weighs on both alike.
      const rows = HINTS.map((hints) => ({ hints, times: [], hung: [], requests: 0, bytes: 0 }));
      for (let run = 0; run < RUNS; run++) {
        for (const row of rows) {
          const load = await coldLoad(link, target, row.hints);
          if (load.hung) {
            row.hung.push(load.hung);
            continue;
          }
          row.times.push(load.ms);
          row.requests = load.requests;
          row.bytes = load.bytes;
        }
      }
      for (const row of rows) {
        row.times.sort((a, b) => a - b);
        const ms = (t) => (t === undefined ? '-' : t.toFixed(0));
        console.log(`| ${link.name} | ${target.path} | ${row.hints ? 'sent' : 'removed'} | ${ms(row.times[Math.floor(row.times.length / 2)])} | ${ms(row.times[0])} | ${ms(row.times.at(-1))} | ${row.hung.length} | ${row.requests} | ${(row.bytes / 1024).toFixed(0)} |`);
        for (const why of row.hung) console.log(`  not alive after 20 s: ${why}`);
      }
    }
  }
} finally {
  await browser.close();
}
