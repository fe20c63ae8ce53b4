// The official `openai` npm client's Responses API against a running `aerie serve`: responses.create whole
// and streamed (raw events and the .stream() helper that assembles them), the same text as chat
// completions for the same conversation, a function call answered through previous_response_id, structured
// output through text.format, retrieve and delete, and the typed errors for bad requests.
//
//   AERIE_BASE_URL=http://127.0.0.1:PORT/v1 AERIE_API_KEY=... AERIE_MODEL=... node responses_client_test.mjs
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.AERIE_BASE_URL;
const apiKey = process.env.AERIE_API_KEY ?? 'none';
const model = process.env.AERIE_MODEL;
assert.ok(baseURL && model, 'set AERIE_BASE_URL and AERIE_MODEL');

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const check = async (name, fn) => {
  await fn();
  console.log(`ok - ${name}`);
};

// ignore_eos (vLLM's field, passed through) makes every greedy output exactly max_output_tokens long.
const request = { model, instructions: 'Be brief.', input: 'hello there', max_output_tokens: 16, temperature: 0,
                  ignore_eos: true };
let whole;
await check('responses.create', async () => {
  whole = await client.responses.create(request);
  assert.equal(whole.object, 'response');
  assert.match(whole.id, /^resp_/);
  assert.equal(whole.model, model);
  assert.equal(whole.status, 'incomplete');
  assert.equal(whole.incomplete_details.reason, 'max_output_tokens');
  assert.equal(whole.output.length, 1);
  assert.equal(whole.output[0].type, 'message');
  assert.equal(typeof whole.output_text, 'string');
  assert.ok(whole.output_text.length > 0);
  assert.equal(whole.usage.output_tokens, 16);
  assert.equal(whole.usage.total_tokens, whole.usage.input_tokens + 16);
});

await check('the same text as chat completions for the same conversation', async () => {
  const chat = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hello there' }],
    max_tokens: 16, temperature: 0, ignore_eos: true,
  });
  assert.equal(whole.output_text, chat.choices[0].message.content);
});

await check('streamed events (raw) add up to the whole response', async () => {
  const stream = await client.responses.create({ ...request, stream: true });
  let text = '';
  let sequence = 0;
  let last = null;
  const types = [];
  for await (const event of stream) {
    assert.equal(event.sequence_number, sequence++);
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
    last = event;
  }
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added',
                                       'response.content_part.added']);
  assert.equal(last.type, 'response.incomplete');
  assert.equal(text, whole.output_text);
  assert.deepEqual(last.response.usage, whole.usage);
});

await check('.stream() helper assembles the same response', async () => {
  const final = await client.responses.stream(request).finalResponse();
  assert.equal(final.output_text, whole.output_text);
  assert.equal(final.status, 'incomplete');
});

const tools = [{
  type: 'function', name: 'get_time', description: 'The time in a zone', strict: true,
  parameters: { type: 'object', properties: { zone: { enum: ['utc', 'local'] } }, required: ['zone'],
                additionalProperties: false },
}];

await check('a function call, streamed and whole, answered through previous_response_id', async () => {
  const call_request = { model, input: 'What time is it?', tools, tool_choice: 'required', max_output_tokens: 200,
                         temperature: 0 };
  const first = await client.responses.create(call_request);
  const call = first.output.find((item) => item.type === 'function_call');
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, 'get_time');
  assert.ok(['utc', 'local'].includes(JSON.parse(call.arguments).zone));
  const streamed = await client.responses.stream(call_request).finalResponse();
  const streamed_call = streamed.output.find((item) => item.type === 'function_call');
  assert.equal(streamed_call.arguments, call.arguments);
  assert.equal(streamed.status, 'completed');

  const answer = await client.responses.create({
    model, previous_response_id: first.id, max_output_tokens: 8, temperature: 0, ignore_eos: true,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '12:00' }],
  });
  assert.equal(answer.previous_response_id, first.id);
  assert.equal(answer.usage.output_tokens, 8);
  // The same conversation sent whole gives the same text.
  const resent = await client.responses.create({
    model, max_output_tokens: 8, temperature: 0, ignore_eos: true,
    input: [{ role: 'user', content: 'What time is it?' }, ...first.output,
            { type: 'function_call_output', call_id: call.call_id, output: '12:00' }],
  });
  assert.equal(resent.output_text, answer.output_text);
});

await check('text.format json_schema', async () => {
  const schema = { type: 'object', properties: { unit: { enum: ['celsius', 'fahrenheit'] }, windy: { type: 'boolean' } },
                   required: ['unit', 'windy'], additionalProperties: false };
  const result = await client.responses.create({
    model, input: 'weather?', max_output_tokens: 300, temperature: 0,
    text: { format: { type: 'json_schema', name: 'report', schema, strict: true } },
  });
  const report = JSON.parse(result.output_text);
  assert.deepEqual(Object.keys(report), ['unit', 'windy']);
});

await check('retrieve and delete', async () => {
  const got = await client.responses.retrieve(whole.id);
  assert.equal(got.id, whole.id);
  assert.deepEqual(got.output, whole.output);
  await client.responses.delete(whole.id);
  await assert.rejects(client.responses.retrieve(whole.id), (e) => e instanceof OpenAI.NotFoundError);
});

await check('typed errors', async () => {
  await assert.rejects(client.responses.create({ model, input: 'x', previous_response_id: 'resp_missing' }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, 'previous_response_id');
    assert.equal(e.code, 'previous_response_not_found');
    return true;
  });
  await assert.rejects(client.responses.create({ model, input: 'x', tools: [{ type: 'web_search' }] }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, 'tools[0].type');
    return true;
  });
});

console.log('all responses checks passed');
