// What a person sees, in a real browser (headless Chromium): the demo's timeline page from a real
// run, and the queue's live page following a job from pending to leased to done while a stale
// finish shows up among the refusals. Run after `npm run build` (it starts dist/).
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, onTestFinished, test } from 'vitest';
import { browserTestsRun, launchChromium, screenshots, watchedPage } from '../helpers/browser.js';
import { runCli, startProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

describe.skipIf(!browserTestsRun())('in a browser', () => {
  test(
    "the demo's timeline page: a lane per worker and a red mark per refused call",
    { timeout: 180_000 },
    async () => {
      const browser = await launchChromium();
      const dir = tempDir('leasehold-ui-demo-');
      const html = join(dir, 'timeline.html');
      const run = await runCli([
        'demo',
        '--jobs',
        '8',
        '--lease-ms',
        '1000',
        '--work-ms',
        '200',
        '--keep',
        '--html',
        html,
      ]);
      const kept = /files kept in (\S+)/.exec(run.stdout)?.[1];
      if (kept) onTestFinished(() => rmSync(kept, { recursive: true, force: true }));
      expect(run.stdout, run.stderr).toContain(`the timeline as a picture: ${html}`);
      expect(kept, run.stdout).toBeDefined();

      // What the workers reported, and the verdict's own counts of the stale calls refused.
      const events = readFileSync(join(kept!, 'events.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { event: string; worker: string; op?: string; code?: string });
      const tally = (label: string) => Number(new RegExp(`${label} \\(409\\)\\s+(\\d+)`).exec(run.stdout)?.[1]);
      const verdict = {
        send: tally('stale sends refused'),
        finish: tally('stale finishes refused'),
        renew: tally('stale renewals refused'),
      };
      expect(verdict.send + verdict.finish, run.stdout).toBeGreaterThanOrEqual(2);

      const { page, errors } = await watchedPage(browser);
      await page.goto(pathToFileURL(html).href);
      await page.locator('svg#timeline').waitFor();
      await screenshots(dir, 'demo')(page, 'demo-timeline');

      const workers = new Set(events.map((e) => e.worker));
      expect(await page.locator('g.lane[data-worker]').count()).toBe(workers.size);
      expect(workers.size).toBe(3);
      expect(await page.locator('g.lane-receiver').count()).toBe(1);
      for (const [op, count] of Object.entries(verdict)) {
        expect(await page.locator(`g.refusal[data-op="${op}"][data-code="stale_lease"]`).count(), op).toBe(count);
      }
      expect(await page.locator('g.refusal').count()).toBe(events.filter((e) => e.event === 'refused').length);
      // Hovering shows the reason: the mark's SVG title.
      const reason = await page.locator('g.refusal[data-op="send"] > title').first().textContent();
      expect(reason).toMatch(/send of \S+ with token \d+ REFUSED: 409 stale_lease/);
      // Hovering a mark brings out everything of its job, across the lanes.
      await page.locator('g.refusal').first().hover();
      const job = await page.locator('g.refusal').first().getAttribute('data-job');
      expect(await page.locator('svg#timeline.focus').count()).toBe(1);
      expect(await page.locator(`g.lease.same[data-job="${job}"]`).count()).toBeGreaterThanOrEqual(2);
      expect(await page.locator('g.freeze').count()).toBeGreaterThanOrEqual(2);
      expect(await page.locator('g.kill').count()).toBe(1);

      // The verdict is beside the chart where there is room, below it where there is not: never
      // cut off at the window's edge, nor the page wider than the window.
      for (const width of [1700, 1400, 1024]) {
        await page.setViewportSize({ width, height: 900 });
        const table = await page.locator('.verdict table').boundingBox();
        const chart = await page.locator('section.chart').boundingBox();
        const pageWidth = (await page.evaluate('document.documentElement.scrollWidth')) as number;
        expect({ width, tableRight: table!.x + table!.width <= width, pageWidth: pageWidth <= width }).toEqual({
          width,
          tableRight: true,
          pageWidth: true,
        });
        expect({ width, besideTheChart: table!.x >= chart!.x + chart!.width }).toEqual({
          width,
          besideTheChart: width === 1700,
        });
        await screenshots(dir, 'demo')(page, `demo-timeline-${width}`);
      }
      expect(errors).toEqual([]);
    },
  );

  test('the live page: a job from pending to leased to done, and a stale finish among the refusals', async () => {
    const dir = tempDir('leasehold-ui-live-');
    const key = 'ui-test-key';
    const queue = await startProcess('queue', ['--port', '0', '--db', join(dir, 'queue.sqlite'), '--api-key', key]);
    const call = async (path: string, body: object) => {
      const res = await fetch(new URL(path, queue.url), {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as { lease?: { token: number } } };
    };
    const shot = screenshots(dir, 'live');
    const browser = await launchChromium();
    const { page, errors } = await watchedPage(browser, { width: 1280, height: 800 });

    // The key travels in the fragment (never sent to the server) and is then taken off the address.
    await page.goto(new URL(`/ui#key=${key}`, queue.url).href);
    expect(new URL(page.url()).hash).toBe('');
    expect((await call('/jobs', { id: 'ui-1', qty: 3 })).status).toBe(201);
    await page.locator('#pending [data-job="ui-1"]').waitFor();
    await shot(page, 'live-1-pending');

    const first = (await call('/claims', { owner: 'w1', leaseMs: 60_000 })).body.lease!;
    const row = page.locator('#leases tr[data-job="ui-1"]');
    await row.waitFor();
    expect(await row.textContent()).toMatch(/ui-1w1t1.*\d+\.\d s/);
    expect(await page.locator('#pending [data-job="ui-1"]').count()).toBe(0);
    await shot(page, 'live-2-leased');

    // w1 hands the job back, w2 claims it under token 2, and w1's late finish is refused.
    expect((await call('/jobs/ui-1/release', { owner: 'w1', token: first.token })).status).toBe(200);
    const second = (await call('/claims', { owner: 'w2', leaseMs: 60_000 })).body.lease!;
    expect((await call('/jobs/ui-1/finish', { owner: 'w1', token: first.token })).status).toBe(409);
    const refusal = page.locator('#refusals tr[data-op="finish"][data-job="ui-1"]');
    await refusal.waitFor();
    expect(await refusal.getAttribute('data-reason')).toBe('token_mismatch');
    expect(await refusal.textContent()).toContain('w1 t1');

    expect((await call('/jobs/ui-1/finish', { owner: 'w2', token: second.token })).status).toBe(200);
    await page.locator('#done [data-job="ui-1"]').waitFor();
    expect(await page.locator('#leases tr[data-job="ui-1"]').count()).toBe(0);
    expect(await page.locator('#tokens tr[data-job="ui-1"] .claim').allTextContents()).toEqual(['t1 w1', 't2 w2']);
    await shot(page, 'live-3-done');
    expect(errors).toEqual([]);
  });

  // A hidden tab costs the queue nothing, even when it was hidden while a poll was on its way.
  test('the live page stops polling when hidden, a poll in flight included, and starts again when shown', async () => {
    const dir = tempDir('leasehold-ui-hidden-');
    const queue = await startProcess('queue', ['--port', '0', '--db', join(dir, 'queue.sqlite')]);
    const browser = await launchChromium();
    const { page, errors } = await watchedPage(browser, { width: 1024, height: 700 });
    const polls: number[] = [];
    page.on('request', (req) => {
      if (req.url().endsWith('/ui/state')) polls.push(Date.now());
    });
    let holdMs = 0;
    await page.route('**/ui/state', async (route) => {
      if (holdMs > 0) await new Promise((resolve) => setTimeout(resolve, holdMs));
      await route.continue().catch(() => undefined);
    });
    // Runs in the page, as a function (the page's CSP allows no script from a string); this
    // file's types know no DOM, so the document is reached as the EventTarget it is.
    const setHidden = (hidden: boolean) =>
      page.evaluate((h) => {
        const doc = (globalThis as unknown as { document: EventTarget }).document;
        Object.defineProperty(doc, 'hidden', { configurable: true, get: () => h });
        doc.dispatchEvent(new Event('visibilitychange'));
      }, hidden);

    await page.goto(new URL('/ui', queue.url).href);
    await page.locator('#updated', { hasText: /^updated/ }).waitFor();
    // Hidden while a poll is held on its way: its answer must not schedule another.
    holdMs = 400;
    await page.waitForRequest((req) => req.url().endsWith('/ui/state'));
    await setHidden(true);
    holdMs = 0;
    await page.waitForTimeout(800);
    const hiddenFrom = polls.length;
    await page.waitForTimeout(3_000);
    expect(polls.length - hiddenFrom, 'polls in 3 s while hidden').toBe(0);

    await setHidden(false);
    await page.waitForTimeout(3_000);
    expect(polls.length - hiddenFrom, 'polls in 3 s once shown again').toBeGreaterThanOrEqual(2);
    expect(errors).toEqual([]);
  });
});
