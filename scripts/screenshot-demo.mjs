#!/usr/bin/env node
// The README's picture of the demo, from a real run: runs `leasehold demo`, opens the timeline page
// it writes in headless Chromium (Debian's package, driven by playwright-core) and saves a PNG.
//
//   npm run screenshot                               # docs/demo-timeline.png, after a build
//   node scripts/screenshot-demo.mjs [--out file.png] [-- demo flags, e.g. --seed 7]
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CHROMIUM, launchHeadless } from './chromium.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist', 'cli', 'leasehold.js');

class Refusal extends Error {}

const argv = process.argv.slice(2);
const split = argv.indexOf('--');
const own = split === -1 ? argv : argv.slice(0, split);
const demoFlags = split === -1 ? [] : argv.slice(split + 1);
const outAt = own.indexOf('--out');
const out = resolve(outAt === -1 ? join(ROOT, 'docs', 'demo-timeline.png') : (own[outAt + 1] ?? ''));

async function main() {
  if (!existsSync(CLI)) throw new Refusal(`${CLI} is missing: run "npm run build" first (npm run screenshot does).`);
  if (!existsSync(CHROMIUM)) {
    throw new Refusal(`no Chromium at ${CHROMIUM}: apt-get install chromium, or set LEASEHOLD_CHROMIUM.`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-screenshot-'));
  try {
    const html = join(dir, 'timeline.html');
    // The demo's own output goes to stderr, so stdout stays for the one line naming the PNG.
    const code = await new Promise((done) => {
      const child = spawn(process.execPath, [CLI, 'demo', ...demoFlags, '--html', html], {
        stdio: ['ignore', process.stderr, process.stderr],
      });
      child.on('exit', (exitCode) => done(exitCode));
    });
    // A picture for the README shows a passing run; a failing one is the demo's to explain.
    if (code !== 0) throw new Refusal(`the demo exited with ${code}: no screenshot taken.`);
    await screenshot(html);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${out}\n`);
}

async function screenshot(html) {
  const browser = await launchHeadless();
  try {
    const page = await browser.newPage({ viewport: { width: 1700, height: 800 } });
    const errors = [];
    page.on('pageerror', (err) => errors.push(err.message));
    page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
    await page.goto(pathToFileURL(html).href);
    await page.locator('svg#timeline').waitFor();
    await page.screenshot({ path: out, fullPage: true });
    if (errors.length > 0) throw new Refusal(`the page reported errors: ${errors.join('; ')}`);
  } finally {
    await browser.close();
  }
}

main().catch((err) => {
  process.stderr.write(`screenshot-demo: ${err instanceof Refusal ? err.message : (err?.stack ?? err)}\n`);
  process.exitCode = 1;
});
