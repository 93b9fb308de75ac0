// statebank's /v1/responses seen through clients nobody here wrote: the
// official `openai` npm client (responses.create and responses.stream) and
// the OpenAI Agents SDK (@openai/agents), against the real server on the
// random-weight demo model. Forced function calls and json_schema outputs
// must parse and validate: with random weights only the server's constraint
// can make them so. Run by tests/server/protocols/responses/responses_e2e_test.cpp:
//   SB_BASE_URL=http://127.0.0.1:PORT node --test tools/server/responses.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from '../npm/node_modules/openai/index.mjs';
import { z } from '../npm/node_modules/zod/index.js';
import {
  Agent, run, tool, OpenAIResponsesModel, setTracingDisabled,
} from '../npm/node_modules/@openai/agents/dist/index.mjs';

setTracingDisabled(true);
const baseURL = process.env.SB_BASE_URL + '/v1';
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;
const bypass = { headers: { 'X-Cache-Mode': 'bypass' } };

const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather of a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['C', 'F'] } },
    required: ['city', 'unit'],
    additionalProperties: false,
  },
  strict: true,
};
const personSchema = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' } },
  required: ['name', 'age'],
  additionalProperties: false,
};
// Long enough (several 256-token blocks) for the bank to restore a prefix.
const instructions = 'You answer questions about the weather, briefly and politely. '.repeat(80);

function checkUsage(r) {
  assert.equal(r.object, 'response');
  assert.ok(r.usage.input_tokens > 0);
  assert.ok(r.usage.output_tokens >= 1);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(r.usage.input_tokens_details.cached_tokens, r.restore.restore_point);
  assert.ok(r.restore.restore_point <= r.restore.common_prefix_tokens);
}

// What the model said, as text: each item's parts with their text and logprob digits.
const said = (r) => JSON.stringify(r.output.map((i) => [i.type, i.arguments, (i.content ?? []).map((c) => [c.text, c.logprobs])]));

// The stream's events: types in order, sequence numbers 0, 1, 2, ...
async function collect(stream) {
  const types = [];
  let seq = 0;
  for await (const event of stream) {
    assert.equal(event.sequence_number, seq++);
    types.push(event.type);
  }
  return { types, final: await stream.finalResponse() };
}

test('responses.create: text, usage, restore record', async () => {
  const r = await client.responses.create({ model, instructions, input: 'Hello there', max_output_tokens: 8,
    temperature: 0 });
  checkUsage(r);
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.output.at(-1).type, 'message');
  assert.equal(typeof r.output_text, 'string');
  assert.ok(r.output_text.length > 0);
  assert.equal(r.instructions, instructions);
  assert.equal(r.max_output_tokens, 8);
});

test('responses.stream: the event sequence, and the same response as a whole one', async () => {
  const body = { model, instructions, input: [{ role: 'user', content: 'Stream it.' }], max_output_tokens: 10,
    temperature: 0, include: ['message.output_text.logprobs'] };
  const whole = await client.responses.create(body);
  const { types, final } = await collect(client.responses.stream(body));
  assert.deepEqual(types.slice(0, 5), ['response.created', 'response.in_progress', 'response.output_item.added',
    'response.content_part.added', 'response.output_text.delta']);
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done',
    'response.output_item.done', 'response.incomplete']);
  assert.equal(said(final), said(whole));
  assert.equal(final.output_text, whole.output_text);
  const lp = final.output[0].content[0].logprobs;
  assert.equal(lp.length, final.usage.output_tokens);
  for (const e of lp) assert.ok(e.logprob <= 0 && Number.isFinite(e.logprob));
});

test('forced function call: create and stream give a valid call', async () => {
  const body = { model, input: 'Weather in Paris?', tools: [weather],
    tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 60, temperature: 1, seed: 3 };
  const r = await client.responses.create(body);
  const calls = r.output.filter((i) => i.type === 'function_call');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  const args = JSON.parse(calls[0].arguments);
  assert.equal(typeof args.city, 'string');
  assert.ok(['C', 'F'].includes(args.unit));
  assert.ok(calls[0].call_id.length > 0);
  assert.equal(r.status, 'completed');
  const { types, final } = await collect(client.responses.stream(body));
  for (const t of ['response.function_call_arguments.delta', 'response.function_call_arguments.done'])
    assert.ok(types.includes(t), t);
  assert.equal(types.at(-1), 'response.completed');
  assert.equal(final.output.find((i) => i.type === 'function_call').arguments, calls[0].arguments);
  // The call and its output sent back: the next turn is accepted.
  const next = await client.responses.create({ model, input: ['Weather in Paris?', calls[0],
    { type: 'function_call_output', call_id: calls[0].call_id, output: '18 C' }].map((i) =>
    (typeof i === 'string' ? { role: 'user', content: i } : i)), tools: [weather], max_output_tokens: 4 });
  assert.ok(next.usage.input_tokens > r.usage.input_tokens);
});

test('text.format json_schema: create and stream give valid JSON', async () => {
  for (const seed of [1, 2]) {
    const body = { model, input: 'A person, please.', max_output_tokens: 60, temperature: 1, seed,
      text: { format: { type: 'json_schema', name: 'person', schema: personSchema, strict: true } } };
    const r = await client.responses.create(body);
    const person = JSON.parse(r.output_text);
    assert.equal(typeof person.name, 'string');
    assert.ok(Number.isInteger(person.age));
    const { final } = await collect(client.responses.stream(body));
    assert.equal(final.output_text, r.output_text);
  }
});

test('bank and bypass give the same output bit for bit, whole and streamed', async () => {
  const body = { model, instructions, input: 'Tell me about rain.', max_output_tokens: 12, temperature: 0,
    include: ['message.output_text.logprobs'], top_logprobs: 2 };
  await client.responses.create(body);  // stores the prefix
  const { data: served, response: http } = await client.responses.create(body).withResponse();
  assert.ok(['ram', 'ssd', 'mixed'].includes(served.restore.mode), served.restore.mode);
  // The restore record in the headers too, as on every route.
  assert.equal(http.headers.get('x-restore-mode'), served.restore.mode);
  assert.equal(Number(http.headers.get('x-restore-point')), served.restore.restore_point);
  assert.ok(served.usage.input_tokens_details.cached_tokens >= 256);
  const cold = await client.responses.create(body, bypass);
  assert.equal(cold.restore.mode, 'bypass');
  assert.equal(said(served), said(cold));
  const streamed = (await collect(client.responses.stream(body))).final;
  const streamedCold = (await collect(client.responses.stream(body, bypass))).final;
  assert.ok(streamed.usage.input_tokens_details.cached_tokens >= 256);
  assert.equal(streamedCold.usage.input_tokens_details.cached_tokens, 0);
  assert.equal(said(streamed), said(streamedCold));
  assert.equal(said(streamed), said(served));
});

test('errors: OpenAI error shape, naming the field', async () => {
  await assert.rejects(client.responses.create({ model, input: 'x', previous_response_id: 'resp_1' }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.error.param, 'previous_response_id');
    return true;
  });
  await assert.rejects(client.responses.create({ model, input: 'x', tools: [{ type: 'namespace', name: 'n' }] }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.error.param, 'tools[0].tools');
    return true;
  });
  // A built-in tool cannot run here: left out of the prompt with a warning, not refused.
  const r = await client.responses.create({ model, input: 'x', max_output_tokens: 2, tools: [{ type: 'web_search' }] });
  assert.equal(r.warnings.length, 1);
  assert.match(r.warnings[0], /^tools\[0\]: .*web_search/);
});

test('Agents SDK: an agent with one tool runs to completion', async () => {
  const calls = [];
  const getWeather = tool({
    name: 'get_weather',
    description: 'The weather of a city',
    parameters: z.object({ city: z.string().max(12) }),
    execute: async ({ city }) => {
      calls.push(city);
      return `It is sunny in ${city}.`;
    },
  });
  const agent = new Agent({
    name: 'Weather',
    instructions: 'Answer with the weather.',
    model: new OpenAIResponsesModel(client, model),
    tools: [getWeather],
    // Random weights never choose a tool: the call is forced, and its output is the answer.
    modelSettings: { toolChoice: 'get_weather', maxTokens: 60, temperature: 0 },
    toolUseBehavior: 'stop_on_first_tool',
  });
  const result = await run(agent, 'What is the weather in Oslo?');
  assert.equal(calls.length, 1);
  assert.equal(result.finalOutput, `It is sunny in ${calls[0]}.`);
  const items = result.newItems.map((i) => i.type);
  assert.deepEqual(items, ['tool_call_item', 'tool_call_output_item']);
  // The same run streamed: the same call, the same answer.
  const streamed = await run(agent, 'What is the weather in Oslo?', { stream: true });
  let events = 0;
  for await (const _ of streamed) events++;
  await streamed.completed;
  assert.ok(events > 0);
  assert.equal(calls.length, 2);
  assert.equal(calls[1], calls[0]);
  assert.equal(streamed.finalOutput, result.finalOutput);
});
