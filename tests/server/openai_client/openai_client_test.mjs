// The official `openai` npm client against a running `aerie serve`: models, chat, streaming (raw chunks
// and the .stream() helper that assembles them), a tool-call request, legacy completions, and the typed
// errors the client raises from the server's OpenAI error objects.
//
//   AERIE_BASE_URL=http://127.0.0.1:PORT/v1 AERIE_API_KEY=... AERIE_MODEL=... node openai_client_test.mjs
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.AERIE_BASE_URL;
const apiKey = process.env.AERIE_API_KEY ?? 'none';
const model = process.env.AERIE_MODEL;
assert.ok(baseURL && model, 'set AERIE_BASE_URL and AERIE_MODEL');

// Wait for readiness: /health is 503 while the weights load.
const health = baseURL.replace(/\/v1\/?$/, '') + '/health';
for (let i = 0; ; ++i) {
  const ok = await fetch(health).then((r) => r.status === 200, () => false);
  if (ok) break;
  assert.ok(i < 600, 'the server did not become ready');
  await new Promise((r) => setTimeout(r, 100));
}

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const messages = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: [{ type: 'text', text: 'hello there' }] },
];
const checks = [];
const check = async (name, fn) => {
  await fn();
  checks.push(name);
  console.log(`ok - ${name}`);
};

await check('models.list', async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, model);
  assert.equal(models.data[0].object, 'model');
});

let whole;
await check('chat.completions.create', async () => {
  whole = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, ignore_eos: true });
  assert.equal(whole.object, 'chat.completion');
  assert.match(whole.id, /^chatcmpl-/);
  assert.equal(whole.model, model);
  assert.equal(whole.choices.length, 1);
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(typeof whole.choices[0].message.content, 'string');
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.completion_tokens, 16);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 16);
});

await check('chat streaming (raw chunks) equals the whole response', async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 16, temperature: 0, ignore_eos: true, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const choice of chunk.choices) {
      if (choice.delta.role) role = choice.delta.role;
      text += choice.delta.content ?? '';
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.deepEqual(usage, whole.usage);
});

await check('chat .stream() helper assembles the same message', async () => {
  const runner = client.chat.completions.stream({ model, messages, max_tokens: 16, temperature: 0, ignore_eos: true });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, whole.choices[0].message.content);
  assert.equal(final.choices[0].finish_reason, 'length');
});

await check('logprobs: whole and .stream() helper agree with the text', async () => {
  const request = { model, messages, max_tokens: 10, temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 2 };
  const result = await client.chat.completions.create(request);
  const entries = result.choices[0].logprobs.content;
  assert.equal(entries.length, 10);
  assert.equal(entries.map((e) => e.token).join(''), result.choices[0].message.content);
  for (const e of entries) {
    assert.equal(e.top_logprobs.length, 2);
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(e.logprob <= 0);
  }
  const final = await client.chat.completions.stream(request).finalChatCompletion();
  assert.deepEqual(final.choices[0].logprobs.content.map((e) => e.token), entries.map((e) => e.token));
});

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const wellFormed = (choice) => {
  assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason));
  assert.equal(choice.message.role, 'assistant');
  for (const call of choice.message.tool_calls ?? []) {
    assert.match(call.id, /^call_/);
    assert.equal(call.type, 'function');
    assert.equal(typeof call.function.name, 'string');
    JSON.parse(call.function.arguments);
  }
  if (!choice.message.tool_calls?.length) assert.equal(typeof choice.message.content, 'string');
};

await check('tool-call request round-trips (whole and streamed)', async () => {
  const request = { model, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, tool_choice: 'auto',
                    max_tokens: 12, temperature: 0 };
  const result = await client.chat.completions.create(request);
  wellFormed(result.choices[0]);
  const final = await client.chat.completions.stream(request).finalChatCompletion();
  wellFormed(final.choices[0]);
  assert.equal(final.choices[0].message.content ?? '', result.choices[0].message.content ?? '');
});

await check('structured output: .parse() with a json_schema, and a forced tool call', async () => {
  const schema = {
    type: 'object',
    properties: { unit: { enum: ['celsius', 'fahrenheit'] }, windy: { type: 'boolean' } },
    required: ['unit', 'windy'],
    additionalProperties: false,
  };
  const parsed = await client.chat.completions.parse({
    model, messages, max_tokens: 300, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'report', schema, strict: true } },
  });
  const report = parsed.choices[0].message.parsed;
  assert.ok(['celsius', 'fahrenheit'].includes(report.unit));
  assert.equal(typeof report.windy, 'boolean');
  assert.deepEqual(Object.keys(report), ['unit', 'windy']);

  const forced = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Weather in Paris?' }], max_tokens: 300, temperature: 0,
    tools: [{ type: 'function', function: { name: 'report', parameters: schema } }],
    tool_choice: { type: 'function', function: { name: 'report' } },
  });
  const call = forced.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'report');
  const args = JSON.parse(call.function.arguments);
  assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
});

await check('completions.create with echo, and streamed', async () => {
  const result = await client.completions.create({ model, prompt: 'hello', max_tokens: 8, temperature: 0, echo: true });
  assert.equal(result.object, 'text_completion');
  assert.ok(result.choices[0].text.startsWith('hello'));
  const stream = await client.completions.create({ model, prompt: 'hello', max_tokens: 8, temperature: 0, echo: true,
                                                   stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, result.choices[0].text);
});

await check('penalties change a greedy reply; echo with logprobs scores the prompt', async () => {
  const base = { model, messages, max_tokens: 24, temperature: 0, ignore_eos: true };
  const plain = await client.chat.completions.create(base);
  const penalised = await client.chat.completions.create({ ...base, frequency_penalty: 2, presence_penalty: 1,
                                                           repetition_penalty: 3 });
  assert.notEqual(penalised.choices[0].message.content, plain.choices[0].message.content);
  await assert.rejects(client.chat.completions.create({ ...base, presence_penalty: 3 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'presence_penalty');
  const scored = await client.completions.create({ model, prompt: 'hello world', max_tokens: 2, temperature: 0,
                                                   echo: true, logprobs: 2 });
  const lp = scored.choices[0].logprobs;
  assert.equal(lp.token_logprobs[0], null);
  assert.ok(lp.token_logprobs.length >= 3 && lp.token_logprobs.slice(1).every((x) => typeof x === 'number' && x <= 0));
  assert.ok(lp.tokens.join('').endsWith(scored.choices[0].text));  // the first token may be the BOS, not echoed
});

await check('n = 2 with a seed reproduces', async () => {
  const request = { model, messages, max_tokens: 8, n: 2, seed: 3, temperature: 1, ignore_eos: true };
  const a = await client.chat.completions.create(request);
  const b = await client.chat.completions.create(request);
  assert.equal(a.choices.length, 2);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
});

await check('errors surface as the client\'s typed errors', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'no-such-model', messages, max_tokens: 2 }),
                       (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found');
  await assert.rejects(client.chat.completions.create({ model, messages, max_tokens: 100000 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
  await assert.rejects(client.chat.completions.create({ model, messages, max_tokens: 2, n: 'two' }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'n');
  const wrongKey = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrongKey.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

console.log(`openai client: ${checks.length} checks passed`);
