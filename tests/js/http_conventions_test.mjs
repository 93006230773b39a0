// HTTP conventions real clients rely on (#23 deliverable 5), against `mxserve serve` on the demo
// model with an API key and one allowed browser origin: CORS preflights (answered without the key,
// refused for other origins, methods and headers), CORS headers on answers and errors, X-Request-Id
// echoed or made, GET /v1/models/{id} (also through the openai client's models.retrieve), OPTIONS,
// responses input parts (function_call_output lists flattened to their text, non-text parts
// refused) and truncated items marked incomplete. Usage: node http_conventions_test.mjs MXSERVE
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { skipUnlessReady, runSuite } from './serve_util.mjs';

const binary = process.argv[2];
skipUnlessReady(binary);

const KEY = 'sk-conventions';
const ORIGIN = 'https://app.example.com';
const auth = { Authorization: `Bearer ${KEY}` };
const json = { 'Content-Type': 'application/json' };
const chat = { model: 'demo', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0 };

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('a preflight from the allowed origin is answered without the key and grants what it asked', async ({ base }) => {
  const r = await fetch(base + '/v1/chat/completions', { method: 'OPTIONS', headers: { Origin: ORIGIN,
    'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' } });
  assert.equal(r.status, 204);
  assert.equal(r.headers.get('access-control-allow-origin'), ORIGIN);
  assert.match(r.headers.get('access-control-allow-methods'), /POST/);
  assert.equal(r.headers.get('access-control-allow-headers'), 'authorization, content-type');
  assert.ok(Number(r.headers.get('access-control-max-age')) > 0);
  assert.equal(r.headers.get('vary'), 'Origin');
});

test('preflights from another origin, or asking for a method or header not allowed, get 403', async ({ base }) => {
  const pre = (origin, method, hdrs) => fetch(base + '/v1/chat/completions', { method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': hdrs } });
  for (const [origin, method, hdrs, word] of [['https://evil.example', 'POST', 'content-type', 'evil.example'],
    [ORIGIN, 'DELETE', 'content-type', 'DELETE'], [ORIGIN, 'POST', 'x-secret', 'x-secret']]) {
    const r = await pre(origin, method, hdrs);
    assert.equal(r.status, 403, `${origin} ${method} ${hdrs}`);
    assert.equal(r.headers.get('access-control-allow-origin'), null);
    assert.ok((await r.json()).error.message.includes(word));
  }
});

test('answers and errors carry the CORS headers for the allowed origin only', async ({ base }) => {
  const ok = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { ...json, ...auth, Origin: ORIGIN }, body: JSON.stringify(chat) });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('access-control-allow-origin'), ORIGIN);
  assert.match(ok.headers.get('access-control-expose-headers'), /X-Request-Id/);
  const denied = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { ...json, Origin: ORIGIN }, body: JSON.stringify(chat) });
  assert.equal(denied.status, 401);  // no key: the browser can still read why
  assert.equal(denied.headers.get('access-control-allow-origin'), ORIGIN);
  const other = await fetch(base + '/v1/models', { headers: { ...auth, Origin: 'https://evil.example' } });
  assert.equal(other.status, 200);
  assert.equal(other.headers.get('access-control-allow-origin'), null);
  const none = await fetch(base + '/v1/models', { headers: auth });
  assert.equal(none.headers.get('access-control-allow-origin'), null);
});

test('X-Request-Id: the client\'s echoed, a fresh one otherwise, an unusable one replaced', async ({ base }) => {
  const get = (h) => fetch(base + '/v1/models', { headers: { ...auth, ...h } });
  assert.equal((await get({ 'X-Request-Id': 'trace-42.abc' })).headers.get('x-request-id'), 'trace-42.abc');
  const a = (await get({})).headers.get('x-request-id'), b = (await get({})).headers.get('x-request-id');
  assert.match(a, /^req_[a-z0-9]{24}$/);
  assert.notEqual(a, b);
  const long = (await get({ 'X-Request-Id': 'x'.repeat(200) })).headers.get('x-request-id');
  assert.match(long, /^req_/);
  const err = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { ...json, ...auth, 'X-Request-Id': 'e1' }, body: '{' });
  assert.equal(err.status, 400);
  assert.equal(err.headers.get('x-request-id'), 'e1');
});

test('GET /v1/models/{id}: the served model, 404 model_not_found for another; openai models.retrieve', async ({ base }) => {
  const r = await fetch(base + '/v1/models/demo', { headers: auth });
  assert.equal(r.status, 200);
  const m = await r.json();
  assert.equal(m.id, 'demo');
  assert.equal(m.object, 'model');
  const miss = await fetch(base + '/v1/models/openai%2Fgpt-oss-120b', { headers: auth });
  assert.equal(miss.status, 404);
  const e = (await miss.json()).error;
  assert.equal(e.code, 'model_not_found');
  assert.ok(e.message.includes('openai/gpt-oss-120b'));
  const client = new OpenAI({ baseURL: base + '/v1', apiKey: KEY });
  assert.equal((await client.models.retrieve('demo')).id, 'demo');
  await assert.rejects(client.models.retrieve('nope'), (err) => err.status === 404);
  assert.equal((await fetch(base + '/v1/models/demo')).status, 401);
});

test('OPTIONS that is no preflight lists the methods', async ({ base }) => {
  const r = await fetch(base + '/v1/models', { method: 'OPTIONS' });
  assert.equal(r.status, 204);
  assert.equal(r.headers.get('allow'), 'GET, POST, DELETE, OPTIONS');
});

const responses = async (base, body) => {
  const r = await fetch(base + '/v1/responses', { method: 'POST', headers: { ...json, ...auth },
    body: JSON.stringify({ model: 'demo', temperature: 0, max_output_tokens: 1, ...body }) });
  return { status: r.status, body: await r.json() };
};
const callThen = (output) => [{ role: 'user', content: 'weather?' },
  { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{"city":"Paris"}' },
  { type: 'function_call_output', call_id: 'c1', output }];

test('function_call_output as a list of parts reads as their text', async ({ base }) => {
  const asText = await responses(base, { input: callThen('sunny, 21 C') });
  const asParts = await responses(base, { input: callThen([{ type: 'input_text', text: 'sunny, ' }, { type: 'input_text', text: '21 C' }]) });
  assert.equal(asText.status, 200);
  assert.equal(asParts.status, 200);
  assert.equal(asParts.body.usage.input_tokens, asText.body.usage.input_tokens);  // the same prompt
  const asJson = await responses(base, { input: callThen({ temperature: 21 }) });  // an object: its JSON text
  assert.equal(asJson.status, 200);
});

test('image, file and audio parts are a clear 400 (gpt-oss reads text only)', async ({ base }) => {
  for (const part of [{ type: 'input_image', image_url: 'https://x/y.png' }, { type: 'input_file', file_id: 'f' },
    { type: 'input_audio', input_audio: { data: '', format: 'wav' } }]) {
    const r = await responses(base, { input: [{ role: 'user', content: [{ type: 'input_text', text: 'look' }, part] }] });
    assert.equal(r.status, 400, part.type);
    assert.ok(r.body.error.message.includes(part.type) && r.body.error.message.includes('input[0].content[1]'), r.body.error.message);
  }
  const r = await responses(base, { input: callThen([{ type: 'input_image', image_url: 'https://x/y.png' }]) });
  assert.equal(r.status, 400);
});

test('a response cut by max_output_tokens is incomplete, and so is its last message or call item', async ({ base }) => {
  for (let n = 1; n <= 24; n += 1) {
    const r = await responses(base, { input: 'Tell me a long story.', max_output_tokens: n });
    assert.equal(r.status, 200);
    if (r.body.status !== 'incomplete') continue;
    assert.equal(r.body.incomplete_details.reason, 'max_output_tokens');
    const last = r.body.output.at(-1);
    if (!last || last.type === 'reasoning') continue;  // nothing with a status was cut yet
    assert.equal(last.status, 'incomplete');
    for (const it of r.body.output.slice(0, -1)) if ('status' in it) assert.equal(it.status, 'completed');
    return;
  }
  assert.fail('no response ended with a cut message or call item');
});

test('usage counts reasoning tokens (chat and responses), never more than the output', async ({ base }) => {
  const r = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { ...json, ...auth },
    body: JSON.stringify({ ...chat, max_tokens: 24 }) });
  const u = (await r.json()).usage;
  assert.ok(Number.isInteger(u.completion_tokens_details.reasoning_tokens));
  assert.ok(u.completion_tokens_details.reasoning_tokens >= 0 && u.completion_tokens_details.reasoning_tokens <= u.completion_tokens);
  const resp = await responses(base, { input: 'hi', max_output_tokens: 24 });
  const ru = resp.body.usage;
  assert.ok(Number.isInteger(ru.output_tokens_details.reasoning_tokens));
  assert.ok(ru.output_tokens_details.reasoning_tokens >= 0 && ru.output_tokens_details.reasoning_tokens <= ru.output_tokens);
});

const getJson = async (base, route, method = 'GET') => {
  const r = await fetch(base + route, { method, headers: auth });
  return { status: r.status, body: await r.json() };
};

test('stored responses: GET, previous_response_id continues the conversation, DELETE forgets', async ({ base }) => {
  const first = await responses(base, { input: 'My name is Ada.', max_output_tokens: 4 });
  assert.equal(first.status, 200);
  assert.equal(first.body.store, true);
  const got = await getJson(base, `/v1/responses/${first.body.id}`);
  assert.equal(got.status, 200);
  assert.deepEqual(got.body, first.body);
  const next = await responses(base, { input: 'What is my name?', previous_response_id: first.body.id, max_output_tokens: 4 });
  assert.equal(next.status, 200);
  assert.equal(next.body.previous_response_id, first.body.id);
  // The prompt is the earlier turn (its input and output items) and then the new input: the same
  // as sending that whole conversation.
  const whole = await responses(base, { input: [{ role: 'user', content: 'My name is Ada.' }, ...first.body.output,
    { role: 'user', content: 'What is my name?' }], max_output_tokens: 4, store: false });
  assert.equal(whole.status, 200);
  assert.equal(next.body.usage.input_tokens, whole.body.usage.input_tokens);
  const alone = await responses(base, { input: 'What is my name?', max_output_tokens: 4, store: false });
  assert.ok(next.body.usage.input_tokens > alone.body.usage.input_tokens + 5);
  const del = await getJson(base, `/v1/responses/${first.body.id}`, 'DELETE');
  assert.deepEqual(del.body, { id: first.body.id, object: 'response.deleted', deleted: true });
  assert.equal((await getJson(base, `/v1/responses/${first.body.id}`)).status, 404);
  assert.equal((await getJson(base, `/v1/responses/${first.body.id}`, 'DELETE')).status, 404);
  const gone = await responses(base, { input: 'x', previous_response_id: first.body.id });
  assert.equal(gone.status, 400);
  assert.equal(gone.body.error.code, 'previous_response_not_found');
  const client = new OpenAI({ baseURL: base + '/v1', apiKey: KEY });  // the official client's calls
  const viaClient = await client.responses.create({ model: 'demo', input: 'hi', max_output_tokens: 2 });
  assert.equal((await client.responses.retrieve(viaClient.id)).id, viaClient.id);
  await client.responses.delete(viaClient.id);
  await assert.rejects(client.responses.retrieve(viaClient.id), (err) => err.status === 404);
});

test('store: false keeps nothing; item_reference expands stored items, unknown ones are 400 (reasoning dropped)', async ({ base }) => {
  const off = await responses(base, { input: 'hi', store: false, max_output_tokens: 2 });
  assert.equal(off.body.store, false);
  assert.equal((await getJson(base, `/v1/responses/${off.body.id}`)).status, 404);
  const on = await responses(base, { input: [{ type: 'message', id: 'msg_given1', role: 'user', content: 'Remember 42.' }], max_output_tokens: 2 });
  assert.equal(on.status, 200);
  const byRef = await responses(base, { input: [{ type: 'item_reference', id: 'msg_given1' }, { type: 'item_reference', id: 'rs_unknown' }] });
  const byText = await responses(base, { input: [{ role: 'user', content: 'Remember 42.' }] });
  assert.equal(byRef.status, 200);
  assert.equal(byRef.body.usage.input_tokens, byText.body.usage.input_tokens);
  const missing = await responses(base, { input: [{ type: 'item_reference', id: 'msg_unknown' }] });
  assert.equal(missing.status, 400);
  assert.equal(missing.body.error.code, 'item_not_found');
  for (const bad of [{ store: 'yes' }, { include: 'reasoning.encrypted_content' }, { include: ['message.output_text.logprobs'] }]) {
    const r = await responses(base, { input: 'hi', ...bad });
    assert.equal(r.status, 400, JSON.stringify(bad));
  }
});

test('include reasoning.encrypted_content: reasoning items carry a sealed blob; a forged one is a 400', async ({ base }) => {
  for (let i = 0; i < 6; ++i) {
    const r = await responses(base, { input: `Think step ${i}.`, include: ['reasoning.encrypted_content'], max_output_tokens: 16, temperature: 1, seed: i });
    assert.equal(r.status, 200);
    for (const it of r.body.output.filter((x) => x.type === 'reasoning')) {
      assert.equal(typeof it.encrypted_content, 'string');
      assert.ok(!it.encrypted_content.includes(it.content[0].text) || it.content[0].text === '');
      const back = await responses(base, { input: [{ type: 'reasoning', id: it.id, summary: [], encrypted_content: it.encrypted_content },
        { role: 'user', content: 'continue' }], store: false });
      assert.equal(back.status, 200);
    }
  }
  const forged = await responses(base, { input: [{ type: 'reasoning', summary: [], encrypted_content: Buffer.from('mx1' + 'x'.repeat(60)).toString('base64') },
    { role: 'user', content: 'continue' }] });
  assert.equal(forged.status, 400);
  assert.match(forged.body.error.message, /encrypted_content/);
});

await runSuite({ binary, tests, timeoutMs: 240_000, args: ['--served-model-name', 'demo', '-c', '1024',
  '--api-key', KEY, '--allowed-origins', `["${ORIGIN}"]`, '--allowed-methods', 'GET,POST',
  '--allowed-headers', '["authorization","content-type"]'] });
