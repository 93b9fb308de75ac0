// statebank's HTTP API seen through agent frameworks nobody here wrote: the
// Vercel AI SDK (ai + @ai-sdk/openai-compatible) and LangChain JS
// (@langchain/openai), against the real server and a random-weight model.
// Structured outputs and forced tool calls must parse and validate against
// their zod schemas: with random weights, only the server's constraint can
// make them so. Run by tests/server/frameworks_test.cpp:
//   SB_BASE_URL=http://127.0.0.1:PORT node --test tools/server/frameworks.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { z } from '../npm/node_modules/zod/index.js';
import { generateObject, generateText, streamText, streamObject, tool } from '../npm/node_modules/ai/dist/index.mjs';
import { createOpenAICompatible } from '../npm/node_modules/@ai-sdk/openai-compatible/dist/index.mjs';
import { ChatOpenAI } from '../npm/node_modules/@langchain/openai/index.js';

const baseURL = process.env.SB_BASE_URL + '/v1';
const models = await (await fetch(baseURL + '/models')).json();
const modelId = models.data[0].id;
const provider = createOpenAICompatible({ name: 'statebank', baseURL, supportsStructuredOutputs: true });
const model = provider.chatModel(modelId);

const Person = z.object({
  name: z.string().max(12),
  age: z.number().int(),
  role: z.enum(['admin', 'user', 'guest']),
  tags: z.array(z.string().max(6)).max(2),
  manager: z.string().max(8).nullable(),
});
const Weather = z.object({ city: z.string().max(10), unit: z.enum(['C', 'F']) });

test('AI SDK: generateObject with a zod schema', async () => {
  for (const seed of [1, 2, 3]) {
    const { object, finishReason } = await generateObject({
      model, schema: Person, prompt: 'Describe a person.', seed, temperature: 1, maxOutputTokens: 80,
    });
    assert.equal(finishReason, 'stop');
    Person.parse(object);  // generateObject validated it already; check again
  }
});

test('AI SDK: streamObject gives the same validated object', async () => {
  const stream = streamObject({ model, schema: Person, prompt: 'A person, please.', seed: 9, maxOutputTokens: 80 });
  let partials = 0;
  for await (const _ of stream.partialObjectStream) partials++;
  const object = await stream.object;
  Person.parse(object);
  assert.ok(partials >= 1);
});

test('AI SDK: forced tool call with typed input', async () => {
  const result = await generateText({
    model,
    prompt: 'What is the weather in Paris?',
    tools: { get_weather: tool({ description: 'Weather of a city', inputSchema: Weather }) },
    toolChoice: 'required',
    seed: 4,
    maxOutputTokens: 60,
  });
  assert.equal(result.finishReason, 'tool-calls');
  assert.ok(result.toolCalls.length >= 1);
  for (const call of result.toolCalls) {
    assert.equal(call.toolName, 'get_weather');
    Weather.parse(call.input);
  }
  // A named tool among several.
  const named = await generateText({
    model,
    prompt: 'Pick.',
    tools: {
      get_weather: tool({ inputSchema: Weather }),
      get_time: tool({ inputSchema: z.object({ zone: z.string().max(6) }) }),
    },
    toolChoice: { type: 'tool', toolName: 'get_time' },
    seed: 5,
    maxOutputTokens: 40,
  });
  assert.equal(named.toolCalls[0].toolName, 'get_time');
  z.object({ zone: z.string().max(6) }).parse(named.toolCalls[0].input);
});

test('AI SDK: streaming text equals the whole text for the same seed', async () => {
  const opts = { model, prompt: 'Say something.', seed: 11, temperature: 0.8, maxOutputTokens: 12 };
  const whole = await generateText(opts);
  const stream = streamText(opts);
  let text = '';
  for await (const piece of stream.textStream) text += piece;
  assert.equal(text, whole.text);
  assert.equal(await stream.finishReason, whole.finishReason);
});

function chat(extra = {}) {
  // Room for the longest minimal output (a forced call: wrapper, every required key): the
  // constraint counts a byte per token to be sure an output can always finish.
  return new ChatOpenAI({ model: modelId, apiKey: 'unused', configuration: { baseURL }, maxTokens: 160, temperature: 1, ...extra });
}

test('LangChain: withStructuredOutput (json schema and function calling)', async () => {
  for (const method of ['jsonSchema', 'functionCalling']) {
    const structured = chat({ seed: 6 }).withStructuredOutput(Person, { name: 'person', method });
    const person = await structured.invoke('Describe a person.');
    Person.parse(person);
  }
});

test('LangChain: bindTools with tool_choice', async () => {
  const weatherTool = { name: 'get_weather', description: 'Weather of a city', schema: Weather };
  for (const choice of ['required', 'get_weather']) {
    const bound = chat({ seed: 7 }).bindTools([weatherTool], { tool_choice: choice });
    const msg = await bound.invoke('Weather in Rome?');
    assert.ok(msg.tool_calls.length >= 1, JSON.stringify(msg));
    assert.equal(msg.tool_calls[0].name, 'get_weather');
    Weather.parse(msg.tool_calls[0].args);
  }
});

test('a request without seed reports the one it drew, and replays with it', async () => {
  const body = { model: modelId, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8, temperature: 1 };
  const post = (b) => fetch(baseURL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(b) }).then((r) => r.json());
  const first = await post(body);
  assert.equal(typeof first.seed, 'number');
  const replay = await post({ ...body, seed: first.seed });
  assert.deepEqual(replay.choices, first.choices);
  assert.equal(replay.seed, first.seed);
});
