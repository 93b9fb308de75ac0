// The real Claude Code CLI (`claude -p`, non-interactive) against statebank's
// Messages route. Run by tests/server/protocols/anthropic/messages_client_test.cpp:
//   SB_BASE_URL=http://127.0.0.1:PORT SB_API_KEY=KEY SB_MODEL=NAME node --test tools/server/claude_code.test.mjs
// on a server with --served-model-name NAME and a small --max-tokens-cap
// (the random-weight demo model rarely ends a turn by itself).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const here = new URL('.', import.meta.url).pathname;
const claude = join(here, '../npm/node_modules/.bin/claude');
const captured = join(here, '../../tests/data/agents/claude-code-2.1.332/messages-turn1.json');
const { SB_BASE_URL: baseURL, SB_API_KEY: apiKey, SB_MODEL: model } = process.env;

function runClaude(home, args) {
  const env = {
    PATH: process.env.PATH, HOME: home, ANTHROPIC_BASE_URL: baseURL, ANTHROPIC_API_KEY: apiKey,
    ANTHROPIC_SMALL_FAST_MODEL: model, ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
  };
  const r = spawnSync(claude, ['-p', ...args, '--model', model], { cwd: home, env, encoding: 'utf8', timeout: 240000 });
  return r;
}

// Tokens of Claude Code's system prompt and tools: a request with them less the same request without.
async function systemAndToolTokens() {
  const body = JSON.parse(readFileSync(captured, 'utf8'));
  const count = async (extra) => {
    const r = await fetch(baseURL + '/v1/messages/count_tokens', {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], ...extra }),
    });
    assert.equal(r.status, 200);
    return (await r.json()).input_tokens;
  };
  return (await count({ system: body.system, tools: body.tools })) - (await count({}));
}

test('claude -p answers, its next turn (--continue) and a new session read the system prompt and tools from the bank', async () => {
  const home = mkdtempSync(join(tmpdir(), 'sb-claude-'));
  try {
    const first = runClaude(home, ['Say hi']);
    assert.equal(first.status, 0, `exit ${first.status}: ${first.stdout}\n${first.stderr}`);
    assert.ok(first.stdout.trim().length > 0, 'the model\'s text is printed');
    const second = runClaude(home, ['And then?', '--continue', '--output-format', 'json']);
    assert.equal(second.status, 0, `exit ${second.status}: ${second.stdout}\n${second.stderr}`);
    const result = JSON.parse(second.stdout);
    assert.equal(result.is_error, false);
    assert.ok(result.result.trim().length > 0, 'the second turn\'s text');
    const prefix = await systemAndToolTokens();
    assert.ok(prefix > 5000, `Claude Code's system prompt and tools are ${prefix} tokens`);
    assert.ok(result.usage.cache_read_input_tokens >= prefix,
      `cache_read_input_tokens ${result.usage.cache_read_input_tokens} < ${prefix} (system prompt and tools)`);
    console.log(`# second turn: cache_read_input_tokens ${result.usage.cache_read_input_tokens}, ` +
      `input_tokens ${result.usage.input_tokens}; system prompt and tools ${prefix} tokens`);
    // A new session (not --continue, another question: its billing header
    // block differs) shares the system prompt and tools, as that block is
    // left out of the prompt; the bank restores them up to the block
    // boundary before the user's message (its snapshot).
    const fresh = runClaude(home, ['What is 2+2?', '--output-format', 'json']);
    assert.equal(fresh.status, 0, `exit ${fresh.status}: ${fresh.stdout}\n${fresh.stderr}`);
    const u = JSON.parse(fresh.stdout).usage;
    const least = prefix - Number(process.env.SB_BLOCK_TOKENS ?? 256);
    assert.ok(u.cache_read_input_tokens >= least,
      `new session: cache_read_input_tokens ${u.cache_read_input_tokens} < ${least} (system prompt and tools)`);
    console.log(`# new session's first turn: cache_read_input_tokens ${u.cache_read_input_tokens} of ` +
      `${u.cache_read_input_tokens + u.input_tokens + u.cache_creation_input_tokens}; system prompt and tools ${prefix} tokens`);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});
