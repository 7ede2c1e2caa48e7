// Headless Chromium for the browser tests: Debian's `chromium` package driven by playwright-core
// (no browser download), every console error and page error collected, and screenshots kept
// where a person can look at them.
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { CHROMIUM, launchHeadless } from '../../scripts/chromium.mjs';
import { onTestFinished } from 'vitest';
import { ROOT } from './processes.js';

export { CHROMIUM };

/**
 * Whether the browser tests run: always in CI (CI=true), where a missing Chromium is a failure;
 * elsewhere only when Chromium is installed, with one line saying why they are skipped.
 */
export function browserTestsRun(): boolean {
  if (existsSync(CHROMIUM) || process.env.CI === 'true') return true;
  console.warn(
    `skipping the browser tests: no Chromium at ${CHROMIUM} (apt-get install chromium, or set LEASEHOLD_CHROMIUM)`,
  );
  return false;
}

/** A browser closed when the test ends. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: CI=true needs it (.ci/run installs Debian's chromium package)`);
  }
  const browser = await launchHeadless();
  onTestFinished(() => browser.close());
  return browser;
}

/** A page whose console errors and uncaught errors are collected in `errors`. */
export async function watchedPage(
  browser: Browser,
  viewport = { width: 1700, height: 900 },
): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport });
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (err) => errors.push(`page error: ${err.message}`));
  page.on('requestfailed', (req) => errors.push(`request failed: ${req.url()}`));
  return { page, errors };
}

/**
 * Screenshots of a test: each saved in `dir` (the test's temp dir, kept when it fails) and copied
 * to test-artifacts/<group>/ in the repository (git-ignored), whose path is printed.
 */
export function screenshots(dir: string, group: string): (page: Page, name: string) => Promise<string> {
  const kept = join(ROOT, 'test-artifacts', group);
  mkdirSync(kept, { recursive: true });
  return async (page, name) => {
    const file = join(dir, `${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    const copy = join(kept, `${name}.png`);
    copyFileSync(file, copy);
    console.log(`screenshot: ${copy}`);
    return copy;
  };
}
