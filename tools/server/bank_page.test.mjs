// The /bank page in a real browser: Debian's chromium, headless, driven by
// playwright-core. Run by tests/server/operator/bank_page_test.cpp against a real
// server that served a known workload:
//   SB_BASE_URL=http://127.0.0.1:PORT SB_API_KEY=KEY SB_ARTIFACT_DIR=DIR node --test bank_page.test.mjs
// The page must show what the admin API says, follow new traffic (a page
// that stops refreshing fails), pin a prefix with its button, stay within a
// phone's width, and log no errors (a CSP violation is one). Screenshots go
// to SB_ARTIFACT_DIR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from '../npm/node_modules/playwright-core/index.mjs';

const base = process.env.SB_BASE_URL;
const key = process.env.SB_API_KEY;
const artifacts = process.env.SB_ARTIFACT_DIR || os.tmpdir();
const executablePath = process.env.SB_CHROMIUM || '/usr/bin/chromium';
// How long the page may take to show new numbers: it refreshes every 250 ms.
const followMs = 15000;

async function api(p, options = {}) {
  const r = await fetch(base + p, {
    ...options,
    headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json', ...(options.headers || {}) },
  });
  assert.equal(r.status, 200, `${p}: ${await r.clone().text()}`);
  return r.json();
}

async function apiView() {
  const [bank, requests, prefixes, pins] = await Promise.all([
    api('/v1/bank'), api('/v1/bank/requests?limit=100'), api('/v1/bank/prefixes?limit=10&text=1'), api('/v1/bank/pins')]);
  return { bank, requests, prefixes, pins };
}

// Everything the page shows that the test checks, read from the DOM.
async function pageView(page) {
  return page.evaluate(() => {
    const text = (sel, root = document) => root.querySelector(`[data-testid="${sel}"]`)?.textContent ?? null;
    const rows = (sel) => [...document.querySelectorAll(`[data-testid="${sel}"]`)];
    const tiers = {};
    for (const t of document.querySelectorAll('[data-testid^="tier-"][class="tier"]')) {
      const name = t.dataset.testid.slice(5);
      tiers[name] = {
        bytes: text(`tier-${name}-bytes`, t), budget: text(`tier-${name}-budget`, t),
        blocks: text(`tier-${name}-blocks`, t), snapshots: text(`tier-${name}-snapshots`, t),
        evictions: text(`tier-${name}-evictions`, t),
      };
    }
    return {
      refreshes: Number(document.querySelector('[data-testid="status"]').dataset.refreshCount),
      stale: document.querySelector('[data-testid="status"]').dataset.stale,
      requests: text('stat-requests'), promptTokens: text('stat-prompt-tokens'), cachedTokens: text('stat-cached-tokens'),
      hitRate: text('stat-hit-rate'), pins: text('stat-pins'), tiers,
      requestRows: rows('request-row').map((r) => ({
        id: r.dataset.id, prompt: text('req-prompt-tokens', r), restored: text('req-restore-point', r),
        mode: text('req-mode', r), reason: text('req-reason', r) })),
      prefixRows: rows('prefix-row').map((r) => ({
        chain: r.dataset.chain, tokens: text('prefix-tokens', r), bytes: text('prefix-bytes', r),
        restorable: text('prefix-restorable', r), hits: text('prefix-hits', r),
        pinned: !!r.querySelector('[data-testid="unpin-button"]') })),
      pinRows: rows('pin-row').map((r) => ({ id: r.dataset.id, tokens: text('pin-tokens', r) })),
    };
  });
}

const n = (v) => Number(v).toLocaleString('en-US');
const first = (s) => (s || '').split(' ')[0];

// Every difference between what the page shows and what the API says.
function differences(shown, want) {
  const d = [];
  const eq = (what, got, expected) => { if (got !== expected) d.push(`${what}: page shows ${JSON.stringify(got)}, API says ${JSON.stringify(expected)}`); };
  const e = want.bank.engine;
  eq('requests', shown.requests, n(e.requests));
  eq('prompt tokens', shown.promptTokens, n(e.prompt_tokens));
  eq('cached tokens', shown.cachedTokens, n(e.cached_tokens));
  eq('hit rate', shown.hitRate, (100 * e.cached_tokens / e.prompt_tokens).toFixed(1) + ' % of prompt tokens');
  eq('pins', shown.pins, n(want.pins.pins.length));
  eq('tiers', Object.keys(shown.tiers).join(','), want.bank.tiers.map((t) => t.name).join(','));
  for (const t of want.bank.tiers) {
    const s = shown.tiers[t.name] || {};
    eq(`${t.name} bytes`, s.bytes, n(t.bytes));
    eq(`${t.name} budget`, s.budget, t.budget_bytes ? n(t.budget_bytes) : 'none');
    eq(`${t.name} blocks`, first(s.blocks), n(t.blocks));
    eq(`${t.name} snapshots`, first(s.snapshots), n(t.snapshots));
    eq(`${t.name} evictions`, s.evictions, n(t.evictions));
  }
  const reqs = want.requests.requests.slice(0, 20);
  eq('request rows', shown.requestRows.length, reqs.length);
  reqs.forEach((r, i) => {
    const s = shown.requestRows[i] || {};
    eq(`request ${i} id`, s.id, r.id);
    eq(`request ${i} prompt`, s.prompt, n(r.prompt_tokens));
    eq(`request ${i} restored`, s.restored, n(r.restore.restore_point));
    eq(`request ${i} mode`, s.mode, r.restore.mode);
    const reason = r.restore.miss_reason
      ? r.restore.miss_reason + (r.restore.miss_reason === 'diverged' ? ' at token ' + r.restore.diverged_at : '') : '–';
    eq(`request ${i} reason`, s.reason, reason);
  });
  eq('prefix rows', shown.prefixRows.length, want.prefixes.prefixes.length);
  want.prefixes.prefixes.forEach((p, i) => {
    const s = shown.prefixRows[i] || {};
    eq(`prefix ${i} chain`, s.chain, p.chain);
    eq(`prefix ${i} tokens`, s.tokens, n(p.tokens));
    eq(`prefix ${i} restorable`, s.restorable, n(p.restorable_tokens));
    eq(`prefix ${i} bytes`, s.bytes, n(p.bytes));
    eq(`prefix ${i} hits`, s.hits, n(p.hits));
    eq(`prefix ${i} pinned`, s.pinned, p.pinned_until_ms !== null);
  });
  eq('pin rows', shown.pinRows.map((p) => p.id).join(','), want.pins.pins.map((p) => p.id).join(','));
  return d;
}

// Waits until the page has refreshed past `after` and shows what the API
// says; fails with the differences left when it does not within followMs.
async function expectPageMatchesApi(page, after) {
  const deadline = Date.now() + followMs;
  let last = [];
  for (;;) {
    const shown = await pageView(page);
    if (shown.refreshes > after && shown.stale === 'false') {
      last = differences(shown, await apiView());
      if (last.length === 0) return shown;
    }
    if (Date.now() > deadline) break;
    await page.waitForTimeout(100);
  }
  assert.fail('the page does not show what /v1/bank says:\n  ' + (last.length ? last.join('\n  ') : 'it never refreshed'));
}

test('the /bank page shows the bank as the admin API does, and follows it', async () => {
  assert.ok(base && key, 'SB_BASE_URL and SB_API_KEY are required');
  assert.ok(fs.existsSync(executablePath), `no browser at ${executablePath} (tools/install-deps.sh installs chromium)`);
  fs.mkdirSync(artifacts, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1200, height: 900 },
    // Without these Chromium reaches for the network (updates, sync,
    // field trials) and stalls on a machine that has none.
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const errors = [];
  try {
    const page = context.pages()[0] || await context.newPage();
    page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
    page.on('pageerror', (e) => errors.push('page: ' + e.message));
    await page.goto(base + '/bank?refresh=250');

    // The server wants its admin key: the page asks for it.
    await page.waitForSelector('#key-form:not([hidden])');
    await page.fill('#key', key);
    await page.click('#key-form button');
    let shown = await expectPageMatchesApi(page, 0);
    // The 401s that made it ask were expected; from here on nothing may fail.
    assert.ok(errors.every((e) => e.includes('401')), errors.join('\n'));
    errors.length = 0;
    assert.ok(shown.requestRows.some((r) => r.reason.startsWith('diverged at token')), 'the workload has a diverged request');
    assert.ok(shown.requestRows.some((r) => r.mode === 'ram'), 'the workload has a restored request');
    assert.ok(shown.prefixRows.some((p) => p.pinned), 'the workload pinned a prefix');

    // New traffic: the page must follow it.
    const before = shown.refreshes;
    await api('/v1/completions', { method: 'POST', body: JSON.stringify({ prompt: 'A new customer asks which breads are free of gluten. '.repeat(12), max_tokens: 2 }) });
    shown = await expectPageMatchesApi(page, before);

    // A pin button pins the prefix of its row.
    const row = page.locator('[data-testid="prefix-row"]', { has: page.locator('[data-testid="pin-button"]') }).first();
    const chain = await row.getAttribute('data-chain');
    await row.locator('[data-testid="pin-button"]').click();
    shown = await expectPageMatchesApi(page, shown.refreshes);
    assert.ok(shown.pinRows.some((p) => p.id === chain), 'the pinned prefix is listed under Pins');
    assert.ok((await api('/v1/bank/pins')).pins.some((p) => p.id === chain), 'the server holds the pin');

    await page.screenshot({ path: path.join(artifacts, 'bank_page.png'), fullPage: true });
    // A phone: nothing wider than the screen (tables scroll inside their box).
    await page.setViewportSize({ width: 390, height: 844 });
    const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    assert.ok(widths[0] <= widths[1], `the page is ${widths[0]} px wide on a ${widths[1]} px screen`);
    await page.screenshot({ path: path.join(artifacts, 'bank_page_phone.png'), fullPage: true });
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
});
