// statebank's Anthropic Messages route seen through the official
// `@anthropic-ai/sdk` client, against the real binary. Run by
// tests/server/protocols/anthropic/messages_client_test.cpp:
//   SB_BASE_URL=http://127.0.0.1:PORT SB_API_KEY=KEY SB_MODEL=NAME SB_BLOCK_TOKENS=B \
//     node --test tools/server/anthropic_client.test.mjs
// SB_MODEL is a --served-model-name alias (an agent's own model name).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '../npm/node_modules/@anthropic-ai/sdk/index.mjs';
import Ajv from '../npm/node_modules/ajv/dist/ajv.js';

const baseURL = process.env.SB_BASE_URL;
const apiKey = process.env.SB_API_KEY;
const model = process.env.SB_MODEL;
const B = Number(process.env.SB_BLOCK_TOKENS);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const bypass = { headers: { 'X-Cache-Mode': 'bypass' } };

const system = [{ type: 'text', text: 'You are a terse assistant for a weather service. '.repeat(12) }];
const tools = [{
  name: 'get_weather',
  description: 'The forecast for a city.',
  input_schema: {
    type: 'object',
    properties: { city: { enum: ['Paris', 'Rome', 'Oslo'] }, metric: { type: 'boolean' } },
    required: ['city', 'metric'],
    additionalProperties: false,
  },
}];

const total = (u) => u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

function checkMessage(m) {
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, model);
  assert.ok(m.id.startsWith('msg_'));
  assert.ok(['end_turn', 'max_tokens', 'stop_sequence', 'tool_use'].includes(m.stop_reason), m.stop_reason);
  for (const k of ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'])
    assert.ok(Number.isInteger(m.usage[k]) && m.usage[k] >= 0, k);
  assert.equal(m.usage.cache_read_input_tokens, m.restore.restore_point);
}

test('create: a message with usage, the restore record, and the bank holding its prefix', async () => {
  const body = { model, max_tokens: 6, temperature: 0, system, messages: [{ role: 'user', content: 'Hello there, create.' }] };
  const cold = await client.messages.create(body);
  checkMessage(cold);
  assert.ok(cold.usage.output_tokens >= 1 && cold.usage.output_tokens <= 6);
  assert.equal(cold.restore.mode, 'cold');
  assert.ok(cold.usage.cache_creation_input_tokens >= B, 'the first request stores its full blocks');
  const { data: warm, response } = await client.messages.create(body).withResponse();
  // The restore record is in the headers too.
  assert.equal(response.headers.get('x-restore-mode'), warm.restore.mode);
  assert.equal(Number(response.headers.get('x-restore-point')), warm.usage.cache_read_input_tokens);
  assert.equal(Number(response.headers.get('x-restore-stored-tokens')), warm.restore.stored_tokens);
  const n = total(warm.usage);
  assert.equal(n, total(cold.usage));
  assert.equal(warm.usage.cache_read_input_tokens, Math.floor((n - 1) / B) * B);
  // Bank and bypass: the same tokens (greedy) and the same counts.
  const cut = await client.messages.create(body, bypass);
  assert.equal(cut.restore.mode, 'bypass');
  assert.deepEqual(warm.content, cold.content);
  assert.deepEqual(cut.content, warm.content);
  assert.equal(cut.usage.output_tokens, warm.usage.output_tokens);
  assert.equal(cut.stop_reason, warm.stop_reason);
});

test('stream: Anthropic event order; bank and bypass stream the same text as the whole message', async () => {
  const body = { model, max_tokens: 8, temperature: 0, system, messages: [{ role: 'user', content: 'Stream to me.' }] };
  const whole = await client.messages.create(body);
  const collect = async (options) => {
    const names = [];
    const stream = client.messages.stream(body, options);
    stream.on('streamEvent', (e) => names.push(e.type));
    const final = await stream.finalMessage();
    return { names, final };
  };
  for (const options of [undefined, bypass]) {
    const { names, final } = await collect(options);
    assert.equal(names[0], 'message_start');
    assert.equal(names.at(-1), 'message_stop');
    assert.equal(names.at(-2), 'message_delta');
    assert.ok(names.includes('content_block_start') && names.includes('content_block_stop'));
    assert.equal(textOf(final), textOf(whole));
    assert.equal(final.stop_reason, whole.stop_reason);
    assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
    assert.equal(total(final.usage), total(whole.usage));
  }
});

test('tools: a forced call validates against its input_schema (ajv); stop_reason tool_use', async () => {
  const ajv = new Ajv.default({ strict: false });
  const validate = ajv.compile(tools[0].input_schema);
  for (const tool_choice of [{ type: 'tool', name: 'get_weather' }, { type: 'any' }]) {
    const m = await client.messages.create({
      model, max_tokens: 200, tools, tool_choice, messages: [{ role: 'user', content: 'Weather in Rome?' }],
    });
    checkMessage(m);
    const calls = m.content.filter((b) => b.type === 'tool_use');
    assert.ok(calls.length >= 1, JSON.stringify(m.content));
    assert.equal(calls[0].name, 'get_weather');
    assert.ok(validate(calls[0].input), ajv.errorsText(validate.errors));
    assert.equal(m.stop_reason, 'tool_use');
    // The call and its result continue the conversation.
    const next = await client.messages.create({
      model, max_tokens: 4, tools, messages: [
        { role: 'user', content: 'Weather in Rome?' },
        { role: 'assistant', content: m.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: calls[0].id, content: 'Sunny, 24 C' }] },
      ],
    });
    checkMessage(next);
  }
});

test('count_tokens: the prompt a create would render', async () => {
  const body = { model, system, tools, messages: [{ role: 'user', content: 'Count me.' }] };
  const counted = await client.messages.countTokens(body);
  const created = await client.messages.create({ ...body, max_tokens: 2 });
  assert.equal(counted.input_tokens, total(created.usage));
});

test('cache_control pins the prefix up to its block, one pin per TTL', async () => {
  const pins = async () => (await fetch(baseURL + '/v1/bank/pins', { headers: { 'x-api-key': apiKey } }).then((r) => r.json())).pins;
  const before = new Set((await pins()).map((p) => p.id));
  const long = 'A system prompt long enough for whole blocks. '.repeat(30);
  const m = await client.messages.create({
    model, max_tokens: 2,
    system: [{ type: 'text', text: long, cache_control: { type: 'ephemeral', ttl: '1h' } }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Question one. '.repeat(40), cache_control: { type: 'ephemeral' } },
      { type: 'text', text: 'And after the mark.' }] }],
  });
  const added = (await pins()).filter((p) => !before.has(p.id));
  assert.equal(added.length, 2, JSON.stringify(added));
  const [hour, fiveMinutes] = [...added].sort((a, b) => b.ttl_left_ms - a.ttl_left_ms);
  assert.ok(hour.ttl_left_ms > 3000000 && hour.ttl_left_ms <= 3600000, String(hour.ttl_left_ms));
  assert.ok(fiveMinutes.ttl_left_ms > 200000 && fiveMinutes.ttl_left_ms <= 300000, String(fiveMinutes.ttl_left_ms));
  // Whole blocks of the marked prefixes: the system's within the user's, both within the prompt.
  assert.ok(hour.tokens >= B && hour.tokens % B === 0);
  assert.ok(fiveMinutes.tokens > hour.tokens && fiveMinutes.tokens % B === 0);
  assert.ok(fiveMinutes.tokens <= total(m.usage));
  // Without the text after the mark, the prompt is longer than the 5m prefix by less than one block.
  const text = (await client.messages.countTokens({ model, system: [{ type: 'text', text: long }],
    messages: [{ role: 'user', content: 'Question one. '.repeat(40) }] })).input_tokens;
  assert.ok(fiveMinutes.tokens <= text && text - fiveMinutes.tokens < B + 8, `${fiveMinutes.tokens} vs ${text}`);
});

test('errors: Anthropic-shaped 404, 400 and 401', async () => {
  await assert.rejects(client.messages.create({ model: 'no-such-model', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status === 404 && e.error.type === 'error' && e.error.error.type === 'not_found_error');
  await assert.rejects(client.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }),
    (e) => e.status === 400 && e.error.error.type === 'invalid_request_error' && /image/.test(e.error.error.message));
  const anonymous = new Anthropic({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(anonymous.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status === 401 && e.error.error.type === 'authentication_error');
});

test('chat completions and Messages render one conversation with tools to the same tokens', async () => {
  const question = 'What is the weather in Oslo? '.repeat(20);
  const chat = await fetch(baseURL + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer ' + apiKey },
    body: JSON.stringify({
      model, max_tokens: 5, temperature: 0,
      messages: [{ role: 'system', content: system[0].text }, { role: 'user', content: 'Hi' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo","metric":true}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'Snow' }, { role: 'user', content: question }],
      tools: tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } })),
    }),
  }).then((r) => r.json());
  const messages = await client.messages.create({
    model, max_tokens: 5, temperature: 0, system, tools,
    messages: [{ role: 'user', content: 'Hi' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'get_weather', input: { city: 'Oslo', metric: true } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c1', content: 'Snow' }] },
      { role: 'user', content: question }],
  });
  const n = chat.usage.prompt_tokens;
  assert.equal(total(messages.usage), n);
  // The bank's chain keys hash token ids: every full block the chat request
  // stored is found again, so the ids agree up to the last full block ...
  assert.equal(messages.usage.cache_read_input_tokens, Math.floor((n - 1) / B) * B);
  assert.ok(messages.usage.cache_read_input_tokens > 0);
  // ... and the same greedy reply shows the rest agrees too.
  assert.equal(textOf(messages), chat.choices[0].message.content);
});

// A deterministic generator (mulberry32), so the 200 bodies are the same on every run.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function mutations(pick) {
  const nested = (depth) => { let v = 'x'; for (let i = 0; i < depth; ++i) v = [v]; return v; };
  const wrong = { model: 7, max_tokens: 'many', messages: {}, system: 5, tools: 'all', tool_choice: [], temperature: 'hot',
    top_p: 2, top_k: -3, stream: 'yes', stop_sequences: 'END', thinking: { type: 'sometimes' }, metadata: [],
    service_tier: 9, context_management: 'on' };
  return [
    (b) => { const k = pick(Object.keys(wrong)); b[k] = wrong[k]; },
    (b) => { b['x_' + Math.floor(pick([1, 2, 3]) * 1e6)] = true; },
    (b) => { delete b[pick(['model', 'max_tokens', 'messages'])]; },
    (b) => { b.messages[0].content = [{ type: pick(['image', 'document', 'audio', 'server_tool_use', '']), source: {} }]; },
    (b) => { b.messages[0].content = [{ type: 'tool_result', tool_use_id: 'toolu_' + pick(['a', 'b', 'c']), content: 'r' }]; },
    (b) => { b.messages[0].content = nested(65 + Math.floor(pick([0, 50, 500]))); },
    (b) => { b.messages[0].role = pick(['tool', 'developer', '', 3]); },
    (b) => { b.messages[0].content = pick([null, 4, true, { text: 'x' }]); },
    (b) => { b.tools[0].input_schema = pick(['object', 3, null]); },
    (b) => { b.tool_choice = { type: 'tool', name: pick(['nope', 'get_weathe', '']) }; },
    (b) => { b.system = [{ type: 'text', text: 's', cache_control: { type: 'ephemeral', ttl: pick(['2h', '', 5]) } }]; },
    (b) => { b.messages.push({ role: 'assistant', content: 'prefill' }); },
    (b) => { b.messages[0].content = [{ type: 'text', text: pick([1, null, ['a']]) }]; },
    (b) => { b.max_tokens = pick([0, -1, 1e17, 1.5]); },  // above 2^53: refused (a large one is lowered)
    (b) => { b.messages[0].content = Array.from({ length: 5 }, () => ({ type: 'text', text: 'c', cache_control: { type: 'ephemeral' } })); },
    (b) => { b.messages = []; },
  ];
}

test('200 mutated bodies: every one a 4xx in Anthropic\'s error shape; the server stays healthy', async () => {
  const random = rng(20261204);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const kinds = mutations(pick);
  const base = { model, max_tokens: 4, tools, system, messages: [{ role: 'user', content: 'Hello' }] };
  for (let i = 0; i < 200; ++i) {
    const body = structuredClone(base);
    pick(kinds)(body);
    // Some bodies are cut short: not JSON at all.
    let text = JSON.stringify(body);
    if (random() < 0.1) text = text.slice(0, Math.floor(text.length * random()));
    const r = await fetch(baseURL + '/v1/messages', {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': apiKey }, body: text,
    });
    const answer = await r.json();
    assert.ok(r.status >= 400 && r.status < 500, `body ${i}: status ${r.status} for ${text.slice(0, 300)}`);
    assert.equal(answer.type, 'error', text.slice(0, 300));
    assert.equal(typeof answer.error.type, 'string');
    assert.equal(typeof answer.error.message, 'string');
  }
  assert.equal((await fetch(baseURL + '/health')).status, 200);
  const after = await client.messages.create({ model, max_tokens: 2, messages: [{ role: 'user', content: 'Still there?' }] });
  checkMessage(after);
});
