// The demo's run as one self-contained HTML page: an inline SVG with a swimlane per worker (its
// leases, renewals, sends, refusals, freezes and kill) and one per downstream, the verdict
// beside it. Pure: the recorded run in, the page out; no network, no script needed to read it.
import { formatEntry } from './timeline.js';
import {
  timelineModel,
  type DownstreamLane,
  type LeaseBar,
  type Mark,
  type TimelineInput,
  type WorkerLane,
} from './timeline-lanes.js';
import type { Check } from './verdict.js';

export type { TimelineInput } from './timeline-lanes.js';

const CHART_WIDTH = 1000;
const LABEL_WIDTH = 84;
const RIGHT = 16;
const AXIS_HEIGHT = 30;
const LANE_PAD = 16;
const TRACK_HEIGHT = 34;
const RECEIVER_ROWS = 4;
const RECEIVER_HEIGHT = 30 + RECEIVER_ROWS * 11;

export function renderTimelineHtml(input: TimelineInput): string {
  const verdict = input.ok ? 'PASS' : 'FAIL';
  const { options } = input;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leasehold demo: ${verdict}</title>
<style>${STYLE}</style>
</head>
<body>
<header>
<h1>leasehold demo: the leases in time <span class="${input.ok ? 'pass' : 'fail'}">${verdict}</span></h1>
<p>${options.jobs} jobs, ${options.workers} workers, lease ${options.leaseMs} ms, work ${options.workMs} ms per job, seed ${options.seed}; ${(input.durationMs / 1000).toFixed(1)} s. Times are ms since the demo started. Hover over a mark for what happened; every red mark is a call the services refused.</p>
</header>
<main>
<section class="chart">${renderSvg(input)}${LEGEND}</section>
<aside class="verdict">${renderVerdict(input)}</aside>
</main>
${renderTextTimeline(input)}
<script>${SCRIPT}</script>
</body>
</html>
`;
}

function renderSvg(input: TimelineInput): string {
  const model = timelineModel(input);
  const step = tickStep(model.to - model.from);
  const from = Math.floor((model.from - 100) / step) * step;
  const to = Math.ceil((model.to + 100) / step) * step;
  const x = (ms: number) => round(LABEL_WIDTH + ((ms - from) / (to - from)) * CHART_WIDTH);
  const width = LABEL_WIDTH + CHART_WIDTH + RIGHT;
  const parts: string[] = [];
  let y = AXIS_HEIGHT;
  for (const lane of model.lanes) {
    const height = LANE_PAD * 2 + lane.tracks * TRACK_HEIGHT;
    parts.push(renderWorkerLane(lane, y, height, x, x(to)));
    y += height;
  }
  for (const downstream of model.downstreams) {
    parts.push(renderDownstreamLane(downstream, y, x));
    y += RECEIVER_HEIGHT;
  }
  const grid: string[] = [];
  for (let t = from; t <= to; t += step) {
    grid.push(
      `<line class="grid" x1="${x(t)}" y1="${AXIS_HEIGHT - 6}" x2="${x(t)}" y2="${y}"/>`,
      `<text class="axis" x="${x(t)}" y="${AXIS_HEIGHT - 10}">${(t / 1000).toFixed(step < 1000 ? 1 : 0)} s</text>`,
    );
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="${width}" height="${y + 4}" viewBox="0 0 ${width} ${y + 4}" role="img" aria-label="The demo's leases per worker over time">
<defs>
<pattern id="hatch-expired" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fde2e1"/><line x1="0" y1="0" x2="0" y2="6" stroke="#e0605a" stroke-width="2"/></pattern>
<pattern id="hatch-dead" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#eceff1"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9aa5ad" stroke-width="2"/></pattern>
<pattern id="hatch-frozen" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)"><rect width="8" height="8" fill="#e3f0fb"/><line x1="0" y1="0" x2="0" y2="8" stroke="#b7d4ef" stroke-width="3"/></pattern>
</defs>
${grid.join('\n')}
${parts.join('\n')}
</svg>`;
}

type Scale = (ms: number) => number;

function renderWorkerLane(lane: WorkerLane, top: number, height: number, x: Scale, right: number): string {
  const out: string[] = [];
  const label = lane.kill ? `${lane.worker} ✕` : lane.worker;
  out.push(
    `<g class="lane" data-worker="${esc(lane.worker)}">`,
    `<rect class="lane-bg" x="0" y="${top}" width="${right + RIGHT}" height="${height}"/>`,
    `<text class="lane-label" x="10" y="${top + height / 2 + 4}">${esc(label)}</text>`,
  );
  if (lane.kill) {
    const k = x(lane.kill.at);
    out.push(
      `<rect class="gone" x="${k}" y="${top}" width="${Math.max(0, right - k)}" height="${height}"><title>${esc(lane.worker)} is gone: killed with SIGKILL</title></rect>`,
    );
  }
  for (const freeze of lane.freezes) {
    const [a, b] = [x(freeze.from), x(freeze.to)];
    out.push(
      `<g class="freeze"><title>${esc(freeze.text)}</title>`,
      `<rect x="${a}" y="${top + 2}" width="${Math.max(2, b - a)}" height="${height - 4}" fill="url(#hatch-frozen)"/>`,
      `<text class="fault-label" x="${a + 3}" y="${top + 12}">SIGSTOP</text>`,
      `<text class="fault-label end" x="${b - 3}" y="${top + height - 5}">SIGCONT</text></g>`,
    );
  }
  const rowY = (track: number) => top + LANE_PAD + track * TRACK_HEIGHT + TRACK_HEIGHT / 2;
  for (const bar of lane.leases) out.push(renderLease(lane.worker, bar, rowY(bar.track), x));
  const placed: Array<{ track: number; x: number; offset: number }> = [];
  for (const mark of lane.marks) {
    // Marks a few pixels apart on the same row (a refused renewal and send) are stacked, not hidden.
    const cx = x(mark.at);
    // A stall's mark sits above the bar, clear of the others.
    if (mark.kind === 'stalled') {
      out.push(renderMark(mark, cx, rowY(mark.track)));
      continue;
    }
    const near = placed.filter((p) => p.track === mark.track && Math.abs(p.x - cx) < 13).map((p) => p.offset);
    const offset = [0, -13, 13, -26, 26].find((o) => !near.includes(o)) ?? 0;
    placed.push({ track: mark.track, x: cx, offset });
    out.push(renderMark(mark, cx, rowY(mark.track) + offset));
  }
  if (lane.kill) {
    const k = x(lane.kill.at);
    out.push(
      `<g class="kill"><title>${esc(lane.kill.text)}</title>`,
      `<line x1="${k}" y1="${top + 2}" x2="${k}" y2="${top + height - 2}"/>`,
      `<text class="fault-label kill-label" x="${k + 3}" y="${top + height - 5}">✕ SIGKILL</text></g>`,
    );
  }
  out.push('</g>');
  return out.join('\n');
}

function renderLease(worker: string, bar: LeaseBar, cy: number, x: Scale): string {
  const start = x(bar.start);
  const validEnd = x(bar.endedBy === 'killed' ? bar.end : Math.min(bar.end, bar.leaseUntil));
  const label = `${bar.job} t${bar.token}`;
  const ended: Record<LeaseBar['endedBy'], string> = {
    finished: 'finished',
    failed: 'failed',
    lost: 'reported lost',
    released: 'released',
    killed: 'killed',
    stopped: 'stopped',
    open: 'still open at the end',
  };
  const title =
    `${worker} held ${bar.job} with token ${bar.token} (attempt ${bar.attempt}) from ${bar.start} ms; ` +
    `${ended[bar.endedBy]} at ${bar.end} ms; the lease ran until ${bar.leaseUntil} ms` +
    (bar.renewals.length ? `; renewed ${bar.renewals.length} times` : '');
  const out = [
    `<g class="lease${bar.attempt > 1 ? ' takeover' : ''}" data-job="${esc(bar.job)}" data-token="${bar.token}"><title>${esc(title)}</title>`,
    `<rect class="held" x="${start}" y="${cy - 8}" width="${Math.max(2, validEnd - start)}" height="16" rx="3"/>`,
  ];
  if (bar.endedBy !== 'killed' && bar.end > bar.leaseUntil) {
    const a = x(bar.leaseUntil);
    out.push(
      `<rect class="expired" x="${a}" y="${cy - 8}" width="${Math.max(2, x(bar.end) - a)}" height="16" fill="url(#hatch-expired)"><title>${esc(`${worker} still held token ${bar.token} for ${bar.job} after its lease ran out at ${bar.leaseUntil} ms`)}</title></rect>`,
    );
  }
  if (bar.endedBy === 'killed' && bar.leaseUntil > bar.end) {
    out.push(
      `<rect class="dead" x="${validEnd}" y="${cy - 8}" width="${Math.max(2, x(bar.leaseUntil) - validEnd)}" height="16" fill="url(#hatch-dead)"><title>${esc(`${bar.job} stays leased to the killed ${worker} until ${bar.leaseUntil} ms: nobody else may take it before`)}</title></rect>`,
    );
  }
  for (const at of bar.renewals) {
    out.push(`<line class="heartbeat" x1="${x(at)}" y1="${cy - 12}" x2="${x(at)}" y2="${cy + 8}"/>`);
  }
  // The label sits in the bar when it fits, above it otherwise.
  const fits = label.length * 6.2 + 6 < validEnd - start;
  out.push(
    fits
      ? `<text class="bar-label" x="${start + 4}" y="${cy + 4}">${esc(label)}</text>`
      : `<text class="bar-label outside" x="${start}" y="${cy - 13}">${esc(label)}</text>`,
    '</g>',
  );
  return out.join('');
}

function renderMark(mark: Mark, cx: number, cy: number): string {
  const title = `<title>${esc(`${mark.at} ms: ${mark.text}`)}</title>`;
  const job = `data-job="${esc(mark.job)}" data-token="${mark.token}"`;
  switch (mark.kind) {
    case 'refused':
      return `<g class="refusal" ${job} data-op="${esc(mark.op ?? '')}" data-code="${esc(mark.code ?? '')}">${title}<circle cx="${cx}" cy="${cy}" r="6.5"/><path d="M${cx - 3} ${cy - 3}L${cx + 3} ${cy + 3}M${cx + 3} ${cy - 3}L${cx - 3} ${cy + 3}"/></g>`;
    case 'applied':
    case 'duplicate':
      return `<g class="send ${mark.kind}" ${job}>${title}<path d="M${cx} ${cy - 5}L${cx + 5} ${cy}L${cx} ${cy + 5}L${cx - 5} ${cy}Z"/></g>`;
    case 'stalled':
      return `<g class="stall" ${job}>${title}<rect x="${cx - 3}" y="${cy - 12}" width="2" height="8"/><rect x="${cx + 1}" y="${cy - 12}" width="2" height="8"/></g>`;
  }
}

/** A downstream's lane: each request it judged, at its time, labelled with what it did. */
function renderDownstreamLane({ name, marks }: DownstreamLane, top: number, x: Scale): string {
  const width = LABEL_WIDTH + CHART_WIDTH + RIGHT;
  const cy = top + 16;
  const out = [
    `<g class="lane-downstream lane-${esc(name)}" data-downstream="${esc(name)}">`,
    `<rect class="lane-bg receiver-bg" x="0" y="${top}" width="${width}" height="${RECEIVER_HEIGHT}"/>`,
    `<text class="lane-label" x="10" y="${cy + 4}">${esc(name)}</text>`,
  ];
  // Labels of effects close in time go to the first row where they do not overlap the last one.
  const rowEnds: number[] = [];
  for (const m of marks) {
    const cx = x(m.at);
    // The receiver's effects add to its total; a keyed effect is named by its key.
    const what = m.key === undefined ? `+${m.qty}` : m.key;
    const label = m.outcome === 'applied' ? `${m.job} ${what}` : `${m.job} ${m.outcome}`;
    const half = (label.length * 5.6) / 2;
    let row = rowEnds.findIndex((end) => end < cx - half);
    if (row === -1) row = rowEnds.length < RECEIVER_ROWS ? rowEnds.push(0) - 1 : 0;
    rowEnds[row] = cx + half + 4;
    out.push(
      `<g class="effect ${esc(m.outcome)}" data-job="${esc(m.job)}" data-token="${m.token}"><title>${esc(`${m.at} ms: ${m.text}`)}</title>`,
      `<path d="M${cx} ${cy - 6}L${cx + 6} ${cy}L${cx} ${cy + 6}L${cx - 6} ${cy}Z"/>`,
      `<text class="effect-label" x="${cx}" y="${cy + 19 + row * 11}">${esc(label)}</text></g>`,
    );
  }
  out.push('</g>');
  return out.join('\n');
}

function renderVerdict(input: TimelineInput): string {
  const row = (c: Check) => {
    const mark = c.ok === undefined ? '' : c.ok ? 'ok' : 'FAIL';
    const cls = c.ok === undefined ? 'info' : c.ok ? 'ok' : 'failed';
    return `<tr class="${cls}"><td>${esc(c.label)}</td><td>${esc(c.expected)}</td><td>${esc(c.actual)}</td><td>${mark}</td></tr>`;
  };
  const seconds = (input.durationMs / 1000).toFixed(1);
  const summary = input.ok
    ? `<p class="pass">PASS in ${seconds} s: every effect exactly once per downstream, job and key; the stale calls were refused.</p>`
    : `<p class="fail">FAIL after ${seconds} s:</p><ul>${input.reasons.map((r) => `<li>${esc(r)}</li>`).join('')}</ul>`;
  return `<h2>Verdict</h2>
<p class="note">From the queue's /stats and /jobs, the receiver's /totals, /effects and /journal and the mailer's /effects, /journal and /outbox, read after the run.</p>
<table><thead><tr><th>check</th><th>expected</th><th>actual</th><th></th></tr></thead>
<tbody>${input.checks.map(row).join('\n')}</tbody></table>
${summary}`;
}

function renderTextTimeline(input: TimelineInput): string {
  if (!input.timeline?.length) return '';
  return `<details><summary>The timeline as text</summary><pre>${esc(input.timeline.map(formatEntry).join('\n'))}</pre></details>`;
}

/** A tick every 0.5, 1, 2 or 5 s: about ten to twenty across the chart. */
function tickStep(spanMs: number): number {
  return [500, 1000, 2000, 5000, 10000, 30000, 60000].find((step) => spanMs / step <= 20) ?? 120000;
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const LEGEND = `<ul class="legend">
<li><svg width="34" height="12"><rect width="34" height="12" rx="3" class="sample-held"/></svg> lease held, from claim to its end</li>
<li><svg width="34" height="12"><rect width="34" height="12" fill="#b57edc" rx="3"/></svg> a lease taken over (attempt 2 or later)</li>
<li><svg width="12" height="14"><line x1="6" y1="0" x2="6" y2="14" stroke="#1d2a36" stroke-width="1.5"/></svg> renewal (heartbeat)</li>
<li><svg width="14" height="14"><path d="M7 2L12 7L7 12L2 7Z" fill="#2e9d57"/></svg> effect sent and applied</li>
<li><svg width="14" height="14"><path d="M7 2L12 7L7 12L2 7Z" fill="#9aa5ad"/></svg> duplicate, absorbed</li>
<li><svg width="14" height="14"><circle cx="7" cy="7" r="6" fill="#d93025"/></svg> a refused call (hover for the reason)</li>
<li><svg width="34" height="12"><rect width="34" height="12" fill="#fde2e1" stroke="#e0605a"/></svg> token kept after its lease ran out</li>
<li><svg width="34" height="12"><rect width="34" height="12" fill="#e3f0fb" stroke="#b7d4ef"/></svg> frozen (SIGSTOP to SIGCONT)</li>
<li><svg width="34" height="12"><rect width="34" height="12" fill="#eceff1" stroke="#9aa5ad"/></svg> leased to a killed worker</li>
</ul>`;

const STYLE = `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2a36;margin:20px;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:0 0 4px}
h1 span{font-size:14px;padding:2px 8px;border-radius:4px;vertical-align:middle;color:#fff}
h1 .pass{background:#2e9d57} h1 .fail{background:#d93025}
header p{margin:0 0 14px;color:#4a5863}
main{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}
.chart{overflow-x:auto;flex:0 1 auto;min-width:0;max-width:${LABEL_WIDTH + CHART_WIDTH + RIGHT}px}
.verdict{flex:1 1 420px;min-width:min(420px,100%);max-width:600px}
.verdict table{border-collapse:collapse;font-size:12px;width:100%}
.verdict td,.verdict th{text-align:left;padding:3px 6px;border-bottom:1px solid #e4e8eb;vertical-align:top}
.verdict tr.ok td:last-child{color:#2e9d57;font-weight:600} .verdict tr.failed td{color:#d93025;font-weight:600}
.verdict tr.info td{color:#4a5863}
.verdict p.pass{color:#2e9d57;font-weight:600} .verdict p.fail{color:#d93025;font-weight:600}
.note{color:#4a5863;font-size:12px;margin:0 0 8px}
.legend{list-style:none;padding:0;margin:10px 0 0;display:flex;flex-wrap:wrap;gap:6px 18px;font-size:12px;color:#4a5863}
.legend li{display:flex;align-items:center;gap:6px}
.sample-held{fill:#3f7cc0}
details{margin-top:16px} pre{font-size:12px;background:#f6f8f9;padding:10px;overflow-x:auto}
svg text{font-family:system-ui,-apple-system,"Segoe UI",sans-serif}
.grid{stroke:#e4e8eb} .axis{font-size:11px;fill:#6b7882;text-anchor:middle}
.lane-bg{fill:#fbfcfd;stroke:#e4e8eb} .receiver-bg{fill:#f3faf5}
.lane-label{font-size:13px;font-weight:600;fill:#1d2a36}
.gone{fill:#000;fill-opacity:.04}
.held{fill:#3f7cc0} .takeover .held{fill:#b57edc}
.bar-label{font-size:10.5px;fill:#fff;pointer-events:none} .bar-label.outside{fill:#1d2a36}
.heartbeat{stroke:#1d2a36;stroke-width:1.5}
.refusal circle{fill:#d93025;stroke:#fff;stroke-width:1} .refusal path{stroke:#fff;stroke-width:1.8}
.send.applied path{fill:#2e9d57;stroke:#fff} .send.duplicate path{fill:#9aa5ad;stroke:#fff}
.stall rect{fill:#e8a317}
.fault-label{font-size:10px;fill:#3a6ea5;font-weight:600} .fault-label.end{text-anchor:end}
.kill line{stroke:#1d2a36;stroke-width:2;stroke-dasharray:4 2} .kill-label{fill:#1d2a36}
.effect path{stroke:#fff} .effect.applied path{fill:#2e9d57} .effect.duplicate path{fill:#9aa5ad}
.effect.fenced path,.effect.conflict path{fill:#fff;stroke:#e8711a;stroke-width:2}
.effect-label{font-size:10px;fill:#4a5863;text-anchor:middle}
svg.focus [data-job]{opacity:.25} svg.focus [data-job].same{opacity:1}
`;

// Hovering anything of a job brings out that job's leases, marks and effects across the lanes.
const SCRIPT = `
(function () {
  var svg = document.getElementById('timeline');
  if (!svg) return;
  svg.addEventListener('mouseover', function (e) {
    var el = e.target.closest && e.target.closest('[data-job]');
    if (!el) {
      svg.classList.remove('focus');
      return;
    }
    var job = el.getAttribute('data-job');
    svg.classList.add('focus');
    svg.querySelectorAll('[data-job]').forEach(function (n) {
      n.classList.toggle('same', n.getAttribute('data-job') === job);
    });
  });
  svg.addEventListener('mouseleave', function () {
    svg.classList.remove('focus');
  });
})();
`;
