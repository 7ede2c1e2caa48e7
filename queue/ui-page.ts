// The live page's HTML: plain markup, inline CSS and one inline script that polls /ui/state every
// second and redraws with textContent (never innerHTML: job ids and owners are callers' text).
// With --api-key the script sends the key, taken from the URL's #key= fragment or typed in.
import { createHash } from 'node:crypto';

const SCRIPT = `
(function () {
  'use strict';
  var KEY = 'leasehold.queue.apiKey';
  var base = location.pathname.replace(/\\/+$/, '');
  var stateUrl = base + '/state';
  var fromHash = /(?:^#|&)key=([^&]*)/.exec(location.hash);
  if (fromHash) {
    sessionStorage.setItem(KEY, decodeURIComponent(fromHash[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  var $ = function (id) { return document.getElementById(id); };
  var timer;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    (children || []).forEach(function (child) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    });
    return node;
  }
  function clock(ms) { return new Date(ms).toLocaleTimeString([], { hour12: false }) + '.' + String(ms % 1000).padStart(3, '0'); }
  function secs(ms) { return (ms / 1000).toFixed(1) + ' s'; }
  function fill(id, rows, empty) {
    var target = $(id);
    target.replaceChildren.apply(target, rows.length ? rows : [el(target.tagName === 'TBODY' ? 'tr' : 'li', { class: 'empty' }, [target.tagName === 'TBODY' ? el('td', { colspan: '9' }, [empty]) : empty])]);
  }

  function draw(s) {
    ['pending', 'leased', 'done', 'dead'].forEach(function (status) {
      $('count-' + status).textContent = s.stats[status];
      fill(status, s.jobs[status].map(function (j) {
        return el('li', { 'data-job': j.id, 'data-token': String(j.token) }, [j.id, el('small', {}, [' t' + j.token + (j.owner ? ' ' + j.owner : '')])]);
      }), 'none');
    });
    fill('leases', s.jobs.leased.map(function (j) {
      var left = j.leaseUntil - s.now;
      var bar = el('span', { class: 'left' + (left <= 0 ? ' over' : '') });
      bar.style.width = Math.max(0, Math.min(100, left / 100)) + 'px';
      return el('tr', { 'data-job': j.id }, [el('td', {}, [j.id]), el('td', {}, [j.owner]), el('td', {}, ['t' + j.token]), el('td', {}, [String(j.attempts)]),
        el('td', {}, [bar, left > 0 ? secs(left) : 'expired ' + secs(-left) + ' ago'])]);
    }), 'no job is leased');
    fill('refusals', s.refusals.map(function (r) {
      var p = r.presented, c = r.current;
      return el('tr', { 'data-job': r.job, 'data-op': r.op, 'data-reason': r.reason || '' }, [el('td', {}, [clock(r.at)]), el('td', {}, [r.op]), el('td', {}, [r.job]),
        el('td', {}, [p ? p.owner + ' t' + p.token : '']), el('td', { class: 'reason' }, [r.reason || '']),
        el('td', {}, [c ? c.status + ', ' + (c.owner || 'no owner') + ' t' + c.token : ''])]);
    }), 'no stale lease refused since the queue started');
    fill('tokens', s.tokens.map(function (h) {
      return el('tr', { 'data-job': h.job }, [el('td', {}, [h.job]), el('td', {}, h.claims.map(function (c) {
        return el('span', { class: 'claim', title: 'claimed at ' + clock(c.at) + ', attempt ' + c.attempt }, ['t' + c.token + ' ' + c.owner]);
      }))]);
    }), 'no claim since the queue started');
    $('updated').textContent = 'updated ' + clock(s.now);
  }

  // The next poll, unless the tab is hidden: one hidden while a poll was on its way stops there.
  function later(ms) {
    clearTimeout(timer);
    if (!document.hidden) timer = setTimeout(poll, ms);
  }

  function poll() {
    clearTimeout(timer);
    var key = sessionStorage.getItem(KEY);
    fetch(stateUrl, { headers: key ? { Authorization: 'Bearer ' + key } : {}, cache: 'no-store' })
      .then(function (res) {
        if (res.status === 401) {
          $('auth').hidden = false;
          $('problem').textContent = key ? 'the key given is not this queue\\'s' : 'this queue needs its API key';
          return;
        }
        if (!res.ok) throw new Error('GET /ui/state answered ' + res.status);
        return res.json().then(function (s) {
          $('auth').hidden = true;
          $('problem').textContent = '';
          draw(s);
          later(1000);
        });
      })
      .catch(function (err) {
        $('problem').textContent = String(err.message || err) + '; trying again';
        later(2000);
      });
  }

  $('auth').addEventListener('submit', function (e) {
    e.preventDefault();
    sessionStorage.setItem(KEY, $('key').value);
    $('key').value = '';
    poll();
  });
  // A hidden tab costs the queue nothing: polling pauses until it is shown again.
  document.addEventListener('visibilitychange', function () { if (!document.hidden) poll(); else clearTimeout(timer); });
  poll();
})();
`;

const STYLE = `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2a36;margin:20px;background:#fff}
h1{font-size:20px;margin:0} h2{font-size:15px;margin:18px 0 6px}
header{display:flex;gap:16px;align-items:baseline;flex-wrap:wrap}
#updated{color:#6b7882;font-size:12px} #problem{color:#d93025;font-weight:600}
form{margin:10px 0;padding:10px;border:1px solid #f0c36d;background:#fff8e6;display:flex;gap:8px;align-items:center}
form[hidden]{display:none}
.counts{display:flex;gap:12px;margin-top:12px}
.status{flex:1;min-width:150px;border:1px solid #e4e8eb;border-radius:6px;padding:8px 10px}
.status b{font-size:22px;display:block}
.status ul{list-style:none;padding:0;margin:6px 0 0;max-height:220px;overflow:auto;font-size:12px}
.status li small{color:#6b7882}
.pending b{color:#6b7882} .leased b{color:#3f7cc0} .done b{color:#2e9d57} .dead b{color:#d93025}
table{border-collapse:collapse;font-size:12px;width:100%}
td,th{text-align:left;padding:3px 8px;border-bottom:1px solid #e4e8eb}
.left{display:inline-block;height:8px;background:#3f7cc0;border-radius:2px;margin-right:6px;vertical-align:middle}
.left.over{background:#d93025}
.reason{color:#d93025;font-weight:600}
.claim{display:inline-block;margin:1px 4px 1px 0;padding:0 6px;border-radius:8px;background:#e8eef5}
.claim+.claim:before{content:"→ ";color:#6b7882}
.empty{color:#6b7882}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:0 24px}
@media (max-width:900px){.cols{grid-template-columns:1fr}.counts{flex-wrap:wrap}}
`;

export const UI_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leasehold queue</title>
<style>${STYLE}</style>
</head>
<body>
<header><h1>leasehold queue</h1><span id="updated">loading…</span><span id="problem"></span></header>
<form id="auth" hidden><label for="key">API key</label><input id="key" type="password" autocomplete="off"><button>Use it</button>
<small>kept in this tab only (sessionStorage); or open /ui#key=&lt;key&gt;</small></form>
<section class="counts">
<div class="status pending"><span>pending</span><b id="count-pending">–</b><ul id="pending"></ul></div>
<div class="status leased"><span>leased</span><b id="count-leased">–</b><ul id="leased"></ul></div>
<div class="status done"><span>done (latest)</span><b id="count-done">–</b><ul id="done"></ul></div>
<div class="status dead"><span>dead</span><b id="count-dead">–</b><ul id="dead"></ul></div>
</section>
<div class="cols">
<section><h2>Current leases</h2>
<table><thead><tr><th>job</th><th>owner</th><th>token</th><th>attempt</th><th>time left</th></tr></thead><tbody id="leases"></tbody></table></section>
<section><h2>Token history</h2>
<table><thead><tr><th>job</th><th>claims, oldest first</th></tr></thead><tbody id="tokens"></tbody></table></section>
</div>
<section><h2>Latest stale-lease refusals</h2>
<table><thead><tr><th>at</th><th>call</th><th>job</th><th>presented</th><th>reason</th><th>the job then</th></tr></thead><tbody id="refusals"></tbody></table></section>
<script>${SCRIPT}</script>
</body>
</html>
`;

/**
 * The page runs its own script and nothing else: no other script, no frame, no form post, and
 * fetches only from the queue itself.
 */
export const UI_PAGE_HEADERS: Record<string, string> = {
  'Content-Security-Policy': [
    "default-src 'none'",
    `script-src 'sha256-${createHash('sha256').update(SCRIPT).digest('base64')}'`,
    `style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`,
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; '),
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};
