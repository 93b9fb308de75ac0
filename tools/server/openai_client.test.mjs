// statebank's HTTP API seen through the official `openai` npm client (v4).
// Run by tests/server/protocols/openai/openai_client_test.cpp against a running server:
//   SB_BASE_URL=http://127.0.0.1:PORT [SB_API_KEY=...] [SB_MODEL=...] node --test tools/server/openai_client.test.mjs
// With SB_FAKE=1 the server runs the test backend (tests/server/fake_backend.h),
// whose scripted replies make tool calls and reasoning appear.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from '../npm/node_modules/openai/index.mjs';

const baseURL = process.env.SB_BASE_URL + '/v1';
const apiKey = process.env.SB_API_KEY || 'unused';
const fake = process.env.SB_FAKE === '1';
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

async function modelId() {
  const models = await client.models.list();
  assert.ok(models.data.length >= 1);
  return models.data[0].id;
}

test('models list names the served model', async () => {
  const id = await modelId();
  assert.equal(typeof id, 'string');
  if (process.env.SB_MODEL) assert.equal(id, process.env.SB_MODEL);
});

test('completion with a token-id prompt, logprobs and the restore record', async () => {
  const model = await modelId();
  const prompt = Array.from({ length: 40 }, (_, i) => 100 + i);
  const r = await client.completions.create({ model, prompt, max_tokens: 6, logprobs: 2, temperature: 0, seed: 1 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.prompt_tokens, 40);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 6);
  assert.equal(r.usage.prompt_tokens_details.cached_tokens, r.restore.restore_point);
  for (const f of ['mode', 'restore_point', 'matched_tokens', 'common_prefix_tokens', 'snapshot_position', 'blocks',
    'bytes_read', 'checks', 'check_failures', 'prefill_tokens', 'lookup_ms', 'restore_ms', 'prefill_ms'])
    assert.ok(f in r.restore, `restore.${f}`);
  assert.ok(r.restore.restore_point <= r.restore.common_prefix_tokens);
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, lp.token_logprobs.length);
  for (const v of lp.token_logprobs) assert.ok(v <= 0 && Number.isFinite(v));
  // The same request with the bank bypassed gives the same tokens and digits.
  const b = await client.completions.create({ model, prompt, max_tokens: 6, logprobs: 2, temperature: 0, seed: 1 },
    { headers: { 'X-Cache-Mode': 'bypass' } });
  assert.equal(b.restore.mode, 'bypass');
  assert.deepEqual(b.choices, r.choices);
});

test('streamed completion equals the whole one', async () => {
  const model = await modelId();
  const body = { model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0, seed: 2 };
  const whole = await client.completions.create(body);
  const stream = await client.completions.create({ ...body, stream: true });
  let text = '';
  let last;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    last = chunk;
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(last.choices[0].finish_reason, whole.choices[0].finish_reason);
  assert.equal(last.usage.completion_tokens, whole.usage.completion_tokens);
  assert.ok('restore_point' in last.restore);
});

test('chat completion, plain and streamed', async () => {
  const model = await modelId();
  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello.' }];
  const r = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0, seed: 3, logprobs: true, top_logprobs: 2 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].logprobs.content.length >= 1);
  assert.ok(r.choices[0].logprobs.content[0].top_logprobs.length <= 2);
  assert.equal(r.usage.prompt_tokens_details.cached_tokens, r.restore.restore_point);
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0, seed: 3, stream: true,
    stream_options: { include_usage: true } });
  let content = '';
  let usage;
  for await (const chunk of stream) {
    if (chunk.choices.length) content += chunk.choices[0].delta.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(content, r.choices[0].message.content ?? '');
  assert.equal(usage.completion_tokens, r.usage.completion_tokens);
});

test('a conversation with tools and tool results is accepted', async () => {
  const model = await modelId();
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const messages = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
    { role: 'user', content: fake ? 'CALL_TOOL again' : 'And tomorrow?' },
  ];
  const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'auto', max_tokens: 80, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  if (fake) {
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    const call = r.choices[0].message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
    // Streamed, the client's own accumulator sees the same call.
    const runner = client.chat.completions.stream({ model, messages, tools, max_tokens: 80, temperature: 0 });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].message.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(final.choices[0].message.tool_calls[0].function.arguments), { city: 'Paris' });
  }
});

test('reasoning_content comes back beside content', { skip: !fake }, async () => {
  const model = await modelId();
  const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'THINK first' }], max_tokens: 80 });
  assert.equal(r.choices[0].message.reasoning_content, 'let me see');
  assert.equal(r.choices[0].message.content, 'It is 42.');
});

test('errors arrive as OpenAI errors the client understands', async () => {
  const model = await modelId();
  await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: -1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'max_tokens');
  await assert.rejects(client.completions.create({ model, prompt: [1, 2, 1e9] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'prompt[2]');
  await assert.rejects(client.chat.completions.create({ model, messages: [{ role: 'user', content: 5 }] }),
    (e) => e.status === 400 && e.param === 'messages[0].content');
  await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  await assert.rejects(client.completions.create({ model, prompt: 'x', temperature: 'hot' }),
    (e) => e.status === 400 && e.param === 'temperature');
  if (process.env.SB_API_KEY) {
    const anonymous = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
    await assert.rejects(anonymous.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
  }
  // And the server still serves.
  const ok = await client.completions.create({ model, prompt: 'x', max_tokens: 1 });
  assert.equal(ok.choices.length, 1);
});
