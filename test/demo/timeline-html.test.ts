// The demo's timeline picture from a hand-made run: leases per worker with their ends, the
// refusals as red marks with their reasons, the staged freeze and kill, a lane per downstream, and
// a page that loads nothing from anywhere.
import { describe, expect, test } from 'vitest';
import { renderTimelineHtml } from '../../demo/timeline-html.js';
import { timelineModel, type TimelineInput } from '../../demo/timeline-lanes.js';
import type { WorkerLine } from '../../worker/index.js';

const T0 = 1_700_000_000_000;

type Body = {
  [K in WorkerLine['event']]: Omit<Extract<WorkerLine, { event: K }>, 't' | 'worker'>;
}[WorkerLine['event']];

/** A worker line `ms` after the demo's start. */
function at(ms: number, worker: string, body: Body): WorkerLine {
  return { t: T0 + ms, worker, ...body } as WorkerLine;
}

const stale = { status: 409, code: 'stale_lease', reason: 'token_mismatch', error: 'stale' } as const;
const current = { status: 'leased', owner: 'w2', token: 2, leaseUntil: T0 + 4500 } as const;

function setup(overrides: Partial<TimelineInput> = {}): TimelineInput {
  const events: WorkerLine[] = [
    at(1000, 'w1', { event: 'claimed', job: 'job-01', token: 1, attempt: 1, qty: 6, leaseUntil: T0 + 2500 }),
    at(1100, 'w3', { event: 'claimed', job: 'job-02', token: 1, attempt: 1, qty: 5, leaseUntil: T0 + 2600 }),
    at(1300, 'w1', { event: 'renewed', job: 'job-01', token: 1, leaseUntil: T0 + 2800, stage: 'sending' }),
    at(1310, 'w1', { event: 'stalled', job: 'job-01', token: 1, before: 'send', ms: 750 }),
    at(2000, 'w2', { event: 'claimed', job: 'job-03', token: 1, attempt: 1, qty: 2, leaseUntil: T0 + 3500 }),
    at(3000, 'w2', { event: 'claimed', job: 'job-01', token: 2, attempt: 2, qty: 6, leaseUntil: T0 + 4500 }),
    at(3100, 'w1', { event: 'refused', op: 'renew', job: 'job-01', token: 1, current, ...stale }),
    at(3102, 'w1', {
      event: 'lost',
      job: 'job-01',
      token: 1,
      during: 'renew',
      reason: 'token_mismatch',
      current,
      error: 'lost',
    }),
    at(3105, 'w1', { event: 'refused', op: 'send', job: 'job-01', token: 1, current, ...stale }),
    at(3300, 'w2', { event: 'sent', job: 'job-01', token: 2, qty: 6, outcome: 'applied', effectToken: 2 }),
    at(3305, 'w2', {
      event: 'sent',
      job: 'job-01',
      token: 2,
      to: 'mailer',
      key: 'email',
      outcome: 'applied',
      effectToken: 2,
    }),
    at(3310, 'w2', { event: 'finished', job: 'job-01', token: 2 }),
    at(3400, 'w2', { event: 'finished', job: 'job-03', token: 1 }),
  ];
  return {
    startedAt: T0,
    durationMs: 5000,
    ok: true,
    reasons: [],
    options: { jobs: 6, workers: 3, leaseMs: 1500, workMs: 300, seed: 42 },
    events,
    scenario: {
      staleSend: {
        worker: 'w1',
        job: 'job-01',
        token: 1,
        before: 'send',
        frozenAt: 1320,
        resumedAt: 3090,
        takenOverBy: { worker: 'w2', token: 2 },
        refusal: { op: 'send', status: 409, code: 'stale_lease', reason: 'token_mismatch' },
      },
      kill: { worker: 'w3', job: 'job-02', token: 1, killedAt: 1500 },
    },
    final: {
      stats: { pending: 0, leased: 0, done: 2, dead: 0 },
      jobs: [],
      totals: { effects: 1, qty: 6 },
      effects: [{ jobId: 'job-01', qty: 6, token: 2, appliedAt: T0 + 3290 }],
      journal: [{ seq: 1, jobId: 'job-01', qty: 6, token: 2, outcome: 'applied', at: T0 + 3290 }],
      mailer: {
        effects: [{ jobId: 'job-01', key: 'email', body: { subject: 's' }, token: 2, appliedAt: T0 + 3295 }],
        journal: [{ seq: 1, jobId: 'job-01', key: 'email', token: 2, outcome: 'applied', at: T0 + 3295 }],
        mails: [{ jobId: 'job-01', key: 'email', to: 'a@example.com', subject: 's', token: 2, sentAt: T0 + 3295 }],
      },
    },
    checks: [
      { label: 'stale send refused (w1, job-01, token 1)', expected: '409 stale_lease', actual: '409', ok: true },
      { label: 'stale sends refused (409)', expected: '', actual: '1' },
    ],
    timeline: [{ ms: 1320, who: 'demo', text: 'FREEZE w1 (SIGSTOP) <inside> that stall' }],
    ...overrides,
  };
}

const count = (html: string, needle: string) => html.split(needle).length - 1;

describe('the timeline model', () => {
  test('one lane per worker in name order, each lease from its claim to its last act', () => {
    const model = timelineModel(setup());
    expect(model.lanes.map((l) => l.worker)).toEqual(['w1', 'w2', 'w3']);
    const [w1, w2, w3] = model.lanes;
    // w1 kept acting on token 1 after its lease ran out: the bar runs past leaseUntil to the last refusal.
    expect(w1!.leases).toEqual([
      expect.objectContaining({ job: 'job-01', token: 1, start: 1000, end: 3105, leaseUntil: 2800, endedBy: 'lost' }),
    ]);
    expect(w1!.leases[0]!.renewals).toEqual([1300]);
    expect(w1!.freezes).toEqual([expect.objectContaining({ from: 1320, to: 3090 })]);
    // Killed holding a lease: the bar ends at the kill; the lease itself still runs to leaseUntil.
    expect(w3!.leases).toEqual([expect.objectContaining({ end: 1500, leaseUntil: 2600, endedBy: 'killed' })]);
    expect(w3!.kill?.at).toBe(1500);
    // Two leases held at once sit on two rows of the lane.
    expect(w2!.tracks).toBe(2);
    expect(w2!.leases.map((b) => [b.job, b.track])).toEqual([
      ['job-03', 0],
      ['job-01', 1],
    ]);
  });

  test('every refusal is a mark with the call, the code and the sentence the text timeline prints', () => {
    const [w1] = timelineModel(setup()).lanes;
    const refusals = w1!.marks.filter((m) => m.kind === 'refused');
    expect(refusals.map((m) => [m.op, m.code, m.at])).toEqual([
      ['renew', 'stale_lease', 3100],
      ['send', 'stale_lease', 3105],
    ]);
    expect(refusals[1]!.text).toContain('send of job-01 with token 1 REFUSED: 409 stale_lease (token_mismatch)');
  });

  test("each downstream's journal, relative to the demo's start: the receiver's, then the mailer's with its keys", () => {
    const { downstreams } = timelineModel(setup());
    expect(downstreams.map((d) => d.name)).toEqual(['receiver', 'mailer']);
    expect(downstreams[0]!.marks).toEqual([
      expect.objectContaining({ at: 3290, job: 'job-01', token: 2, qty: 6, outcome: 'applied' }),
    ]);
    expect(downstreams[1]!.marks).toEqual([
      expect.objectContaining({ at: 3295, job: 'job-01', key: 'email', token: 2, outcome: 'applied' }),
    ]);
    expect(downstreams[1]!.marks[0]!.text).toBe('mailer: job-01 key email with token 2: applied');
    // A run without the mailer has the receiver's lane alone.
    const { final } = setup();
    const { mailer: _mailer, ...receiverOnly } = final!;
    expect(timelineModel(setup({ final: receiverOnly })).downstreams.map((d) => d.name)).toEqual(['receiver']);
  });

  test('a lease still open at the end stops at its lease end', () => {
    const input = setup({
      events: [
        at(100, 'w1', { event: 'claimed', job: 'a', token: 1, attempt: 1, qty: 1, leaseUntil: T0 + 900 }),
        at(2000, 'w1', { event: 'finished', job: 'b', token: 1 }),
      ],
      scenario: {},
    });
    expect(timelineModel(input).lanes[0]!.leases[0]).toMatchObject({ end: 900, endedBy: 'open' });
  });
});

describe('the timeline page', () => {
  test('a lane per worker and per downstream, one red mark per refused call with its reason as a title', () => {
    const html = renderTimelineHtml(setup());
    expect(count(html, '<g class="lane" data-worker=')).toBe(3);
    expect(count(html, '<g class="lane-downstream lane-receiver" data-downstream="receiver"')).toBe(1);
    expect(count(html, '<g class="lane-downstream lane-mailer" data-downstream="mailer"')).toBe(1);
    expect(html).toContain('>job-01 +6<');
    expect(html).toContain('>job-01 email<');
    expect(html).toContain('<title>3305 ms: sent job-01 to mailer key email with token 2: applied</title>');
    expect(count(html, '<g class="refusal"')).toBe(2);
    expect(html).toContain(
      'data-op="send" data-code="stale_lease"><title>3105 ms: send of job-01 with token 1 REFUSED',
    );
    expect(html).toContain('>job-01 t1<');
    expect(html).toContain('SIGSTOP');
    expect(html).toContain('✕ SIGKILL');
    expect(html).toContain('stale send refused (w1, job-01, token 1)');
    expect(html).toContain('<title>leasehold demo: PASS</title>');
  });

  test('self-contained: no request leaves the page', () => {
    const html = renderTimelineHtml(setup());
    expect(html).not.toMatch(/<(link|img|iframe)\b/);
    expect(html).not.toMatch(/\b(src|href)=/);
    // The only URL is the SVG namespace, which is a name, not a fetch.
    expect(html.match(/https?:\/\/[^\s"']+/g)).toEqual(['http://www.w3.org/2000/svg']);
  });

  test('text from the run is escaped', () => {
    const html = renderTimelineHtml(setup({ reasons: ['<b>boom</b> & "more"'], ok: false }));
    expect(html).toContain('&lt;b&gt;boom&lt;/b&gt; &amp; &quot;more&quot;');
    expect(html).toContain('FREEZE w1 (SIGSTOP) &lt;inside&gt; that stall');
    expect(html).not.toContain('<b>boom</b>');
    expect(html).toContain('<title>leasehold demo: FAIL</title>');
  });
});
