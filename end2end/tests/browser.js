// Shared helpers: Debian's Chromium driven by playwright-core. Never downloads a browser.
import { chromium } from 'playwright-core';
import path from 'node:path';

export const BASE = process.env.SKILLGATE_URL ?? 'http://127.0.0.1:3000';
export const ADMIN_PASSWORD = process.env.SKILLGATE_ADMIN_PASSWORD;
export const VIEWER_PASSWORD = process.env.SKILLGATE_VIEWER_PASSWORD;
export const REVIEWER_PASSWORD = process.env.SKILLGATE_REVIEWER_PASSWORD;
const SCREENSHOTS = process.env.SKILLGATE_SCREENSHOTS;

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
}

/** A fresh browser context (no cookies) with JavaScript on or off. */
export async function newPage(browser, javaScriptEnabled) {
  const context = await browser.newContext({ javaScriptEnabled, baseURL: BASE });
  const page = await context.newPage();
  if (javaScriptEnabled) {
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.hydrationErrors = errors;
  }
  return page;
}

/** Waits until the wasm bundle has hydrated the page (only meaningful with JS on). */
export async function waitHydrated(page) {
  await page.waitForFunction(() => window.__skillgate_hydrated === true, null, { timeout: 15000 });
}

export async function signIn(page, name, password) {
  await page.goto('/login');
  await page.fill('#name', name);
  await page.fill('#password', password);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
}

/**
 * The navigation's link to a page, found by role and name. Pages sit in groups (menus in
 * the top bar): the link's group is opened first, by a click on it, as a person does.
 */
export async function navLink(page, name) {
  const nav = page.getByRole('navigation', { name: 'Sections' });
  const link = nav.getByRole('link', { name, exact: true });
  if (await link.isVisible()) return link;
  const group = nav.locator('details').filter({ has: page.locator('a').getByText(name, { exact: true }) });
  await group.locator('summary').click();
  await link.waitFor({ state: 'visible', timeout: 5000 });
  return link;
}

export async function screenshot(page, name) {
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/**
 * Waits until the page's `main h1` reads `expected`, then asserts it. After a client-side
 * navigation the URL changes first and a lazy route renders once its chunk has loaded, so
 * reading the heading at once could see the previous page.
 */
export async function expectHeading(page, expected, timeout = 15000) {
  try {
    await page.waitForFunction(
      (want) => document.querySelector('main h1')?.textContent === want,
      expected,
      { timeout },
    );
  } catch {
    // Fall through: the assertion below names what the page shows instead.
  }
  const actual = await page.textContent('main h1');
  if (actual !== expected) {
    throw new Error(`main h1 is ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
  }
}

/** The outcome notice of a console form: its message and the one-time secret, if any. */
export async function outcome(page) {
  await page.waitForSelector('#form-outcome');
  return {
    message: (await page.textContent('#form-outcome p')).trim(),
    secret: (await page.$('#one-time-secret')) ? (await page.textContent('#one-time-secret')).trim() : null,
  };
}

/** Submits the form containing `selector` and waits for its outcome to replace the old one. */
export async function submit(page, js, selector) {
  const before = js ? await page.$eval('#form-outcome', (e) => e.textContent).catch(() => null) : null;
  if (js) {
    await page.click(selector);
    await page.waitForFunction(
      (old) => document.querySelector('#form-outcome')?.textContent !== old, before,
    );
  } else {
    await Promise.all([page.waitForNavigation(), page.click(selector)]);
  }
  return outcome(page);
}
