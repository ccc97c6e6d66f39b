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
  console.log(`| link | page | median ms | min | max | not alive in 20 s (of ${RUNS}) | wasm+js requests | KB moved |`);
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const link of LINKS) {
    for (const target of pages) {
      const times = [];
      const hung = [];
      let requests = 0;
      let bytes = 0;
      for (let run = 0; run < RUNS; run++) {
        const context = await browser.newContext({ baseURL: BASE, storageState: target.state });
        const tab = await context.newPage();
        const cdp = await context.newCDPSession(tab);
        await cdp.send('Network.enable');
        await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
        if (link.conditions) await cdp.send('Network.emulateNetworkConditions', link.conditions);
        const bundle = new Map();
        const refused = [];
        cdp.on('Network.responseReceived', (e) => {
          if (!e.response.url.includes('/pkg/')) return;
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
          // Counted, not fatal: the table says how often a page never came alive, and why.
          hung.push(`${refused.length} refused, ${pending.size} unfinished (first ${[...pending.values()][0] ?? 'none'}), ${consoleErrors[0] ?? 'no console error'}`);
          await context.close();
          continue;
        }
        times.push(performance.now() - start);
        requests = bundle.size;
        bytes = [...bundle.values()].reduce((a, b) => a + b, 0);
        await context.close();
      }
      times.sort((a, b) => a - b);
      const ms = (t) => (t === undefined ? '-' : t.toFixed(0));
      console.log(`| ${link.name} | ${target.path} | ${ms(times[Math.floor(times.length / 2)])} | ${ms(times[0])} | ${ms(times.at(-1))} | ${hung.length} | ${requests} | ${(bytes / 1024).toFixed(0)} |`);
      for (const why of hung) console.log(`  not alive after 20 s: ${why}`);
    }
  }
} finally {
  await browser.close();
}
