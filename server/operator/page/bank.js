// The operator's page (GET /bank): what the bank holds, what the last
// requests restored and why they missed, over the admin API (/v1/bank...).
// Plain DOM, no libraries; every value from the server goes in through
// textContent, never as markup (prefix text is whatever users prompted).
// Refreshes every 2 s, or every ?refresh=MS.
'use strict';

const params = new URLSearchParams(location.search);
const refreshMs = Math.max(200, Number(params.get('refresh')) || 2000);
const keyStore = 'statebank-admin-key';
let refreshCount = 0;
let timer = null;

const $ = (id) => document.getElementById(id);
const int = (n) => (n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US'));
function human(bytes) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Number(bytes), u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; ++u; }
  return (u === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[u];
}
function ago(ms) {
  if (!ms) return '–';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.round(s / 60) + ' min ago';
  if (s < 86400) return Math.round(s / 3600) + ' h ago';
  return Math.round(s / 86400) + ' d ago';
}
function clock(ms) { return new Date(ms).toLocaleTimeString('en-GB'); }
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'testid') e.dataset.testid = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'style') e.style.cssText = v;  // CSSOM: allowed by the page's CSP, unlike a style attribute
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}
const td = (text, testid, cls) => el('td', { text: String(text), ...(testid ? { testid } : {}), ...(cls ? { class: cls } : {}) });

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  const key = sessionStorage.getItem(keyStore);
  if (key) headers.Authorization = 'Bearer ' + key;
  if (options.body) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, { ...options, headers, cache: 'no-store' });
  if (r.status === 401) {
    $('key-form').hidden = false;
    throw Object.assign(new Error('the admin key is needed'), { needsKey: true });
  }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((body.error && body.error.message) || ('HTTP ' + r.status));
  return body;
}

function renderTotals(bank, pins) {
  const e = bank.engine || {};
  $('status').dataset.requests = e.requests;
  document.querySelector('[data-testid=stat-requests]').textContent = int(e.requests);
  document.querySelector('[data-testid=stat-prompt-tokens]').textContent = int(e.prompt_tokens);
  document.querySelector('[data-testid=stat-cached-tokens]').textContent = int(e.cached_tokens);
  const rate = e.prompt_tokens ? (100 * e.cached_tokens / e.prompt_tokens).toFixed(1) + ' % of prompt tokens' : '';
  document.querySelector('[data-testid=stat-hit-rate]').textContent = rate;
  document.querySelector('[data-testid=stat-pins]').textContent = int(pins.pins.length);
  // Speculative decoding: tokens per decode step and the drafts' acceptance.
  const s = e.speculative || {};
  document.querySelector('[data-testid=stat-spec-tokens]').textContent =
    s.decode_steps ? (s.decode_tokens / s.decode_steps).toFixed(2) : '–';
  document.querySelector('[data-testid=stat-spec-acceptance]').textContent =
    s.drafted ? 'drafts accepted: ' + (100 * s.accepted / s.drafted).toFixed(1) + ' %' : 'no drafts yet';
  const q = bank.queue || {};
  document.querySelector('[data-testid=stat-queue]').textContent = int(q.queued) + ' waiting, ' + int(q.running) + ' running';
}

function renderTiers(bank) {
  const box = $('tiers');
  box.replaceChildren();
  for (const t of bank.tiers || []) {
    const budget = t.budget_bytes || 0;
    const share = (b) => (budget ? Math.min(100, 100 * b / budget) : 0) + '%';
    const bar = el('div', { class: 'bar', title: budget ? 'of the budget' : 'no budget' },
      el('span', { class: 'blocks', style: 'width:' + share(t.block_bytes) }),
      el('span', { class: 'snapshots', style: 'width:' + share(t.snapshot_bytes) }));
    const row = (label, value, testid, title) =>
      [el('dt', { text: label }), el('dd', { ...(title ? { title } : {}) }, el('span', { testid, text: value }))];
    const dl = el('dl', {},
      ...row('bytes', int(t.bytes), `tier-${t.name}-bytes`, human(t.bytes)),
      ...row('budget', budget ? int(budget) : 'none', `tier-${t.name}-budget`, budget ? human(budget) : ''),
      ...row('blocks', int(t.blocks) + ' · ' + human(t.block_bytes), `tier-${t.name}-blocks`),
      ...row('snapshots', int(t.snapshots) + ' · ' + human(t.snapshot_bytes), `tier-${t.name}-snapshots`),
      ...row('hits / misses', int(t.hits) + ' / ' + int(t.misses), `tier-${t.name}-hits`),
      ...row('evictions', int(t.evictions), `tier-${t.name}-evictions`));
    const title = el('h3', { text: t.name + (t.writable === false ? ' (read-only)' : '') });
    box.append(el('div', { class: 'tier', testid: `tier-${t.name}` }, title,
      el('div', { class: 'small', text: human(t.bytes) + (budget ? ' of ' + human(budget) : '') }), bar, dl));
  }
}

function svg(tag, attrs, text) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// Per minute: the share of prompt tokens restored from the bank.
function renderHitChart(minutes) {
  const c = $('hit-chart');
  c.replaceChildren(svg('line', { class: 'axis', x1: 0, y1: 170, x2: 600, y2: 170 }),
    svg('text', { x: 2, y: 12 }, '100 %'), svg('text', { x: 2, y: 166 }, '0 %'));
  if (!minutes.length) return;
  const t0 = minutes[0].start_ms, t1 = Math.max(t0 + 60000, minutes[minutes.length - 1].start_ms);
  const x = (t) => 40 + 550 * (t - t0) / (t1 - t0);
  const y = (r) => 170 - 155 * r;
  const pts = minutes.map((m) => [x(m.start_ms), y(m.prompt_tokens ? m.cached_tokens / m.prompt_tokens : 0)]);
  if (pts.length === 1) pts.push([590, pts[0][1]]);
  c.append(svg('polyline', { class: 'line', points: pts.map((p) => p.join(',')).join(' ') }));
  c.append(svg('text', { x: 40, y: 166 }, clock(t0)));
}

// Each recent request: its time to first token, cold or restored.
function renderTtftChart(requests) {
  const c = $('ttft-chart');
  c.replaceChildren(svg('line', { class: 'axis', x1: 0, y1: 170, x2: 600, y2: 170 }));
  if (!requests.length) return;
  const times = requests.map((r) => r.time_ms);
  const t0 = Math.min(...times), t1 = Math.max(t0 + 1000, ...times);
  const top = Math.max(...requests.map((r) => r.ttft_ms), 1);
  c.append(svg('text', { x: 2, y: 12 }, Math.round(top) + ' ms'), svg('text', { x: 2, y: 166 }, '0'));
  for (const r of requests) {
    const cls = r.restore.restore_point > 0 ? 'warm' : 'cold';
    const dot = svg('circle', { class: cls, r: 4, cx: 40 + 550 * (r.time_ms - t0) / (t1 - t0), cy: 170 - 155 * r.ttft_ms / top });
    dot.append(svg('title', {}, `${Math.round(r.ttft_ms)} ms, ${r.restore.restore_point} of ${r.prompt_tokens} tokens restored`));
    c.append(dot);
  }
}

// A namespace as people read it (server/protocols/namespace.h): its length-prefixed
// parts, "t<len>:<tenant>" then "s<len>:<salt>", as "tenant X · salt Y".
function namespaceText(ns) {
  if (ns === '') return '(default)';
  const parts = [];
  let at = 0;
  while (at < ns.length) {
    const head = /^([ts])(\d+):/.exec(ns.slice(at));
    if (!head) return ns;
    const len = Number(head[2]);
    const value = ns.slice(at + head[0].length, at + head[0].length + len);
    parts.push((head[1] === 't' ? 'tenant ' : 'salt ') + value);
    at += head[0].length + len;
  }
  return parts.join(' · ');
}

function reasonText(restore) {
  if (!restore.miss_reason) return '–';
  return restore.miss_reason + (restore.miss_reason === 'diverged' ? ' at token ' + restore.diverged_at : '');
}

function renderRequests(activity) {
  const body = $('requests');
  body.replaceChildren();
  for (const r of activity.requests.slice(0, 20)) {
    const miss = !!r.restore.miss_reason;
    body.append(el('tr', { testid: 'request-row', 'data-id': r.id },
      td(clock(r.time_ms)),
      td(int(r.prompt_tokens), 'req-prompt-tokens'),
      td(int(r.restore.restore_point), 'req-restore-point'),
      td(r.restore.mode, 'req-mode'),
      td(reasonText(r.restore), 'req-reason', 'reason ' + (miss ? 'reason-miss' : 'reason-none')),
      td(Math.round(r.ttft_ms) + ' ms', 'req-ttft'),
      el('td', { class: 'text', title: r.namespace }, el('span', { text: namespaceText(r.namespace) }))));
  }
}

async function pin(chain, ttl) {
  try {
    await api('/v1/bank/pins', { method: 'POST', body: JSON.stringify({ chain, ttl_s: ttl }) });
  } catch (err) { showError(err); }
  refresh();
}
async function unpin(id) {
  try {
    await api('/v1/bank/pins/' + encodeURIComponent(id), { method: 'DELETE' });
  } catch (err) { showError(err); }
  refresh();
}

function renderPrefixes(prefixes) {
  document.querySelector('[data-testid=prefix-total]').textContent = '(' + int(prefixes.total) + ' stored)';
  const body = $('prefixes');
  body.replaceChildren();
  for (const p of prefixes.prefixes) {
    const tiers = Object.entries(p.tiers).filter(([, s]) => s.objects > 0).map(([n, s]) => `${n} ${human(s.bytes)}`).join(', ');
    const ttl = el('select', { 'aria-label': 'pin for' },
      el('option', { value: '600', text: '10 min' }), el('option', { value: '3600', text: '1 h' }),
      el('option', { value: '86400', text: '1 day' }));
    ttl.value = '3600';
    const cell = el('td', {});
    if (p.pinned_until_ms) {
      cell.append(el('button', { class: 'pinned', testid: 'unpin-button', title: 'pinned until ' + new Date(p.pinned_until_ms).toLocaleString('en-GB'),
        onclick: () => unpin(p.chain), text: 'unpin' }));
    } else {
      cell.append(ttl, ' ', el('button', { testid: 'pin-button', onclick: () => pin(p.chain, Number(ttl.value)), text: 'pin' }));
    }
    body.append(el('tr', { testid: 'prefix-row', 'data-chain': p.chain },
      td(int(p.tokens), 'prefix-tokens'),
      td(int(p.restorable_tokens), 'prefix-restorable'),
      el('td', { title: human(p.bytes) }, el('span', { testid: 'prefix-bytes', text: int(p.bytes) })),
      td(tiers || '–'),
      td(int(p.hits), 'prefix-hits'),
      td(ago(p.last_use_ms)),
      el('td', { class: 'text', title: p.text || '' }, el('span', { text: p.text == null ? '–' : p.text })),
      cell));
  }
}

function renderPins(pins) {
  const body = $('pins');
  body.replaceChildren();
  for (const p of pins.pins) {
    const held = Object.entries(p.tiers).map(([n, s]) => `${n} ${human(s.bytes)}`).join(', ');
    body.append(el('tr', { testid: 'pin-row', 'data-id': p.id },
      el('td', { class: 'text', title: p.chain }, el('span', { text: p.chain.slice(0, 12) + '…' })),
      td(int(p.tokens), 'pin-tokens'),
      td(held || '–'),
      td(new Date(p.expires_ms).toLocaleString('en-GB')),
      el('td', {}, el('button', { onclick: () => unpin(p.id), text: 'unpin' }))));
  }
}

function showError(err) {
  const s = $('status');
  s.classList.add('error');
  s.dataset.stale = 'true';
  s.textContent = 'not refreshed: ' + err.message + (s.dataset.last ? ' (data from ' + s.dataset.last + ')' : '');
}

async function refresh() {
  clearTimeout(timer);
  try {
    const [bank, activity, prefixes, pins] = await Promise.all([
      api('/v1/bank'), api('/v1/bank/requests?limit=100'), api('/v1/bank/prefixes?limit=10&text=1'), api('/v1/bank/pins')]);
    renderTotals(bank, pins);
    renderTiers(bank);
    renderHitChart(activity.minutes);
    renderTtftChart(activity.requests);
    renderRequests(activity);
    renderPrefixes(prefixes);
    renderPins(pins);
    const s = $('status');
    s.classList.remove('error');
    s.dataset.stale = 'false';
    s.dataset.last = clock(Date.now());
    s.dataset.refreshCount = String(++refreshCount);
    s.textContent = 'updated ' + s.dataset.last;
  } catch (err) {
    showError(err);
    // Asking again without a key would only be refused again.
    if (err.needsKey) return;
  }
  timer = setTimeout(refresh, refreshMs);
}

$('key-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(keyStore, $('key').value);
  $('key-form').hidden = true;
  refresh();
});
refresh();
