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
  assert.equal(r.headers.get('allow'), 'GET, POST, OPTIONS');
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

await runSuite({ binary, tests, timeoutMs: 120_000, args: ['--served-model-name', 'demo', '-c', '1024',
  '--api-key', KEY, '--allowed-origins', `["${ORIGIN}"]`, '--allowed-methods', 'GET,POST',
  '--allowed-headers', '["authorization","content-type"]'] });
