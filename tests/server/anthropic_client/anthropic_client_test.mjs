// The official `@anthropic-ai/sdk` npm client against a running `aerie serve`: messages.create whole and
// streamed (raw events and the .stream() helper that accumulates them), a forced tool call and its
// tool_result round trip, countTokens, and the typed errors the client raises from Anthropic error bodies.
//
//   AERIE_BASE_URL=http://127.0.0.1:PORT AERIE_API_KEY=... AERIE_MODEL=... node anthropic_client_test.mjs
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const baseURL = process.env.AERIE_BASE_URL;
const apiKey = process.env.AERIE_API_KEY ?? 'none';
const model = process.env.AERIE_MODEL;
assert.ok(baseURL && model, 'set AERIE_BASE_URL and AERIE_MODEL');

// Wait for readiness: /health is 503 while the weights load.
for (let i = 0; ; ++i) {
  const ok = await fetch(`${baseURL}/health`).then((r) => r.status === 200, () => false);
  if (ok) break;
  assert.ok(i < 600, 'the server did not become ready');
  await new Promise((r) => setTimeout(r, 100));
}

// The client sends the key as x-api-key (and anthropic-version, which the server ignores).
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const system = 'Be brief.';
const messages = [
  { role: 'user', content: [{ type: 'text', text: 'hello there' }] },
  { role: 'assistant', content: 'hi' },
  { role: 'user', content: 'tell me a story' },
];
// ignore_eos (an aerie extension the client passes through) makes the length fixed.
const base = { model, system, messages, max_tokens: 16, temperature: 0, ignore_eos: true };
const checks = [];
const check = async (name, fn) => {
  await fn();
  checks.push(name);
  console.log(`ok - ${name}`);
};
const textOf = (message) => message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

let whole;
await check('messages.create', async () => {
  whole = await client.messages.create(base);
  assert.equal(whole.type, 'message');
  assert.equal(whole.role, 'assistant');
  assert.match(whole.id, /^msg_/);
  assert.equal(whole.model, model);
  assert.equal(whole.content.length, 1);
  assert.equal(whole.content[0].type, 'text');
  assert.ok(whole.content[0].text.length > 0);
  assert.equal(whole.stop_reason, 'max_tokens');
  assert.equal(whole.stop_sequence, null);
  assert.equal(whole.usage.output_tokens, 16);
  assert.ok(whole.usage.input_tokens > 0);
});

await check('the text equals chat completions\' for the same conversation', async () => {
  const chat = await fetch(`${baseURL}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model, messages: [{ role: 'system', content: system }, ...messages], max_tokens: 16,
                           temperature: 0, ignore_eos: true }),
  }).then((r) => r.json());
  assert.equal(textOf(whole), chat.choices[0].message.content);
  assert.equal(whole.usage.input_tokens, chat.usage.prompt_tokens);
});

await check('stream: true (raw events) folds to the whole message', async () => {
  const stream = await client.messages.create({ ...base, stream: true });
  const types = [];
  let text = '';
  let stop = null;
  let usage = null;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    if (event.type === 'message_delta') {
      stop = event.delta.stop_reason;
      usage = event.usage;
    }
  }
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.equal(types.at(-2), 'message_delta');
  assert.ok(types.includes('content_block_start') && types.includes('content_block_stop'));
  assert.equal(text, textOf(whole));
  assert.equal(stop, 'max_tokens');
  assert.equal(usage.output_tokens, 16);
});

await check('messages.stream() helper accumulates the same message', async () => {
  let streamedText = '';
  const stream = client.messages.stream(base).on('text', (delta) => { streamedText += delta; });
  const final = await stream.finalMessage();
  assert.equal(textOf(final), textOf(whole));
  assert.equal(streamedText, textOf(whole));
  assert.equal(final.stop_reason, 'max_tokens');
  assert.deepEqual(final.usage, whole.usage);
});

const tools = [{
  name: 'get_time',
  description: 'The current time in a zone',
  input_schema: { type: 'object', properties: { zone: { enum: ['utc', 'local'] } }, required: ['zone'],
                  additionalProperties: false },
}];

await check('a forced tool call, whole and streamed, and its tool_result round trip', async () => {
  const request = { model, max_tokens: 80, temperature: 0, tools, tool_choice: { type: 'tool', name: 'get_time' },
                    messages: [{ role: 'user', content: 'What time is it?' }] };
  const result = await client.messages.create(request);
  assert.equal(result.stop_reason, 'tool_use');
  const call = result.content.find((b) => b.type === 'tool_use');
  assert.ok(call, JSON.stringify(result));
  assert.match(call.id, /^toolu_/);
  assert.equal(call.name, 'get_time');
  assert.ok(['utc', 'local'].includes(call.input.zone));

  const final = await client.messages.stream(request).finalMessage();
  const streamedCall = final.content.find((b) => b.type === 'tool_use');
  assert.deepEqual(streamedCall.input, call.input);
  assert.equal(streamedCall.name, 'get_time');
  assert.equal(final.stop_reason, 'tool_use');

  const answer = await client.messages.create({
    model, max_tokens: 12, temperature: 0, tools,
    messages: [
      ...request.messages,
      { role: 'assistant', content: result.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '12:00' }] },
    ],
  });
  assert.equal(answer.type, 'message');
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(answer.stop_reason));
});

await check('countTokens equals the input_tokens of a generation', async () => {
  const counted = await client.messages.countTokens({ model, system, messages });
  assert.equal(counted.input_tokens, whole.usage.input_tokens);
  const withTools = await client.messages.countTokens({ model, system, messages, tools });
  assert.ok(withTools.input_tokens > counted.input_tokens);
});

await check('errors surface as the client\'s typed errors', async () => {
  await assert.rejects(client.messages.create({ ...base, model: 'claude-no-such-model' }),
                       (e) => e instanceof Anthropic.NotFoundError && e.status === 404 &&
                              e.error?.error?.type === 'not_found_error');
  await assert.rejects(client.messages.create({ ...base, messages: [{ role: 'user', content: [] }] }),
                       (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.type === 'invalid_request_error');
  await assert.rejects(client.messages.create({
    ...base, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'http://x/y.png' } }] }],
  }), (e) => e instanceof Anthropic.BadRequestError && /image/.test(e.message));
  await assert.rejects(client.messages.create({
    ...base, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_none', content: 'x' }] }],
  }), (e) => e instanceof Anthropic.BadRequestError && /toolu_none/.test(e.message));
  const wrongKey = new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrongKey.messages.create(base),
                       (e) => e instanceof Anthropic.AuthenticationError && e.status === 401);
});

console.log(`anthropic client: ${checks.length} checks passed`);
