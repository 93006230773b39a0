// End-to-end test of `mxserve serve` with the official openai npm client: starts the server on
// 127.0.0.1 (random free port, CPU backend, the demo model with the real gpt-oss tokenizer) and
// checks models, chat (whole and streamed, usage chunk), completions, tokenize, errors, 64
// concurrent streams and a client that disconnects mid-stream (the web pages: web_test.mjs).
// Usage: node server_test.mjs MXSERVE
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { skipUnlessReady, runSuite, startServer, stopServer } from './serve_util.mjs';

const binary = process.argv[2];
skipUnlessReady(binary);
const { default: OpenAI } = await import('openai');

const API_KEY = 'test-key';
const MODEL = 'demo';
const MAX_LEN = 4096;
async function post(base, route, body, { auth = true, raw = false } = {}) {
  const headers = { 'Content-Type': 'application/json' };
  if (auth) headers.Authorization = `Bearer ${API_KEY}`;
  const res = await fetch(base + route, { method: 'POST', headers, body: raw ? body : JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

async function expectError(promise, status, check = () => {}) {
  try {
    await promise;
  } catch (e) {
    assert.equal(e.status, status, `expected HTTP ${status}, got ${e.status}: ${e.message}`);
    check(e);
    return;
  }
  assert.fail(`expected HTTP ${status}, the request succeeded`);
}

const tests = [];
const test = (name, fn) => tests.push({ name, fn });
const chatBody = (extra = {}) => ({ model: MODEL, messages: [{ role: 'user', content: 'Why is the sky blue?' }],
  temperature: 0, max_tokens: 8, ...extra });

test('health, models, web page', async ({ base, client }) => {  // the page itself: web_test.mjs
  assert.equal((await fetch(base + '/health')).status, 200);
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
  const page = await (await fetch(base + '/')).text();
  assert.ok(page.includes('/assets/chat.js') && page.includes('reasoning_effort'), 'web page is the chat page');
});

test('chat: non-streaming and streaming agree, usage chunk', async ({ client }) => {
  const whole = await client.chat.completions.create(chatBody());
  const c = whole.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.ok(['length', 'stop'].includes(c.finish_reason));
  assert.ok(whole.usage.prompt_tokens > 0 && whole.usage.completion_tokens >= 1 && whole.usage.completion_tokens <= 8);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);

  const stream = await client.chat.completions.create(chatBody({ stream: true, stream_options: { include_usage: true } }));
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant', 'role chunk first');
  const usage = chunks.at(-1).usage;
  assert.ok(usage && chunks.at(-1).choices.length === 0, 'usage chunk last');
  assert.deepEqual(usage, whole.usage);
  const finish = chunks.filter((ch) => ch.choices[0]?.finish_reason).map((ch) => ch.choices[0].finish_reason);
  assert.deepEqual(finish, [c.finish_reason]);
  const text = chunks.map((ch) => ch.choices[0]?.delta?.content ?? '').join('');
  const reasoning = chunks.map((ch) => ch.choices[0]?.delta?.reasoning_content ?? '').join('');
  assert.equal(text, c.message.content ?? '', 'greedy streamed content equals the whole response');
  assert.equal(reasoning, c.message.reasoning_content ?? '');
});

test('chat: sampling params, n, tools and a tool result in the history', async ({ client }) => {
  const r = await client.chat.completions.create(chatBody({ temperature: 0.8, top_p: 0.9, seed: 3, n: 2,
    reasoning_effort: 'low', top_k: 20, min_p: 0.05, min_tokens: 2, max_completion_tokens: 6 }));
  assert.equal(r.choices.length, 2);
  assert.ok(r.usage.completion_tokens >= 4 && r.usage.completion_tokens <= 12);
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const t = await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 6, tools,
    messages: [{ role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21}' }] });
  assert.ok(['length', 'stop', 'tool_calls'].includes(t.choices[0].finish_reason));
  const j = await client.chat.completions.create(chatBody({ response_format: { type: 'json_schema',
    json_schema: { name: 'answer', schema: { type: 'object', properties: { a: { type: 'string' } } } } } }));
  assert.equal(j.choices.length, 1);
});

test('logprobs: chat (whole and streamed) and completions', async ({ client }) => {
  const r = await client.chat.completions.create(chatBody({ logprobs: true, top_logprobs: 2 }));
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) {
    assert.ok(e.logprob <= 0 && typeof e.token === 'string' && Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 2);
    assert.ok(e.top_logprobs[0].logprob >= e.logprob - 1e-6, 'greedy: the chosen token is the most likely');
  }
  let streamed = [];
  for await (const ch of await client.chat.completions.create(chatBody({ logprobs: true, stream: true })))
    streamed = streamed.concat(ch.choices[0]?.logprobs?.content ?? []);
  assert.deepEqual(streamed.map((e) => e.logprob), content.map((e) => e.logprob));
  const c = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 4, temperature: 0, logprobs: 3 });
  assert.equal(c.choices[0].logprobs.tokens.length, 4);
  assert.equal(c.choices[0].logprobs.top_logprobs[0] && Object.keys(c.choices[0].logprobs.top_logprobs[0]).length <= 3, true);
});

test('completions: string and token-id prompts, streaming', async ({ client }) => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 5);
  assert.equal(r.choices[0].finish_reason, 'length');
  const ids = await client.completions.create({ model: MODEL, prompt: [13225, 2375], max_tokens: 3, temperature: 0 });
  assert.equal(ids.usage.prompt_tokens, 2);
  const stream = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 5, temperature: 0,
    stream: true });
  let text = '';
  for await (const ch of stream) text += ch.choices[0]?.text ?? '';
  assert.equal(text, r.choices[0].text);
});

test('responses: whole and streamed agree, input items with a function call round trip', async ({ client }) => {
  const req = { model: MODEL, input: 'Why is the sky blue?', max_output_tokens: 6, temperature: 0,
    reasoning: { effort: 'low' }, instructions: 'Be brief.' };
  const whole = await client.responses.create(req);
  assert.equal(whole.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(whole.status));
  assert.equal(whole.usage.output_tokens, 6);
  const types = [];
  let text = '';
  for await (const ev of await client.responses.create({ ...req, stream: true })) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)), types.at(-1));
  assert.ok(types.includes('response.output_item.added') && types.includes('response.output_item.done'));
  assert.equal(text, whole.output_text);
  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } } } }];
  const r = await client.responses.create({ model: MODEL, max_output_tokens: 4, temperature: 0, tools, input: [
    { role: 'user', content: 'Weather in Paris?' },
    { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'Need the tool.' }] },
    { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { type: 'function_call_output', call_id: 'call_1', output: '{"temp_c": 21}' }] });
  assert.equal(r.usage.output_tokens, 4);
  await expectError(client.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_1' }), 400);
});

test('run and serve draw the same tokens for a seed (one engine, one sampling rule)', async ({ client, demo }) => {
  // Each `run` loads the model and the tokenizer (~20 s under ASan): two draws, one sampled and one greedy.
  for (const [temperature, seed] of [[1.2, 77], [0, 0]]) {
    const out = execFileSync(binary, ['run', demo, '--backend', 'cpu', '--prompt-ids', '13225,2375,1495', '-n', '12',
      '--temperature', String(temperature), '--seed', String(seed), '--ignore-eos'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const r = await client.completions.create({ model: MODEL, prompt: [13225, 2375, 1495], max_tokens: 12,
      temperature, seed, ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 12);
    assert.equal(out.toString().replace(/\n$/, ''), r.choices[0].text, `temperature ${temperature}, seed ${seed}`);
  }
});

test('a full waiting queue answers 503 with Retry-After, and every other request completes', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mxserve-queue-test-'));
  const small = await startServer(binary, dir, ['-np', '1', '--max-waiting-requests', '1', '--num-gpu-blocks-override', '512']);
  try {
    const one = (stream = false) => fetch(small.base + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Hello', max_tokens: 64, temperature: 0, ignore_eos: true, stream }) });
    // The first request holds the one seat (its first chunk has arrived), then 7 arrive at once:
    // one of them waits, the rest find the queue full.
    const first = await one(true);
    assert.equal(first.status, 200);
    const reader = first.body.getReader();
    await reader.read();
    const res = await Promise.all(Array.from({ length: 7 }, () => one()));
    let streamed = '';
    for (let chunk; !(chunk = await reader.read()).done;) streamed += new TextDecoder().decode(chunk.value);
    assert.match(streamed, /data: \[DONE\]/);
    const codes = res.map((r) => r.status);
    assert.ok(codes.filter((c) => c === 503).length >= 1, `some requests are refused: ${codes}`);
    assert.ok(codes.filter((c) => c === 200).length >= 1, `the waiting one completes: ${codes}`);
    for (const r of res) {
      const body = await r.json();
      if (r.status === 503) {
        assert.equal(r.headers.get('retry-after'), '1');
        assert.match(body.error.message, /overloaded/);
      } else {
        assert.equal(r.status, 200, JSON.stringify(body));
        assert.equal(body.usage.completion_tokens, 64);
      }
    }
  } finally {
    await stopServer(small);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('tokenize and detokenize', async ({ base }) => {
  const t = await post(base, '/tokenize', { model: MODEL, prompt: 'Hello world' });
  assert.equal(t.status, 200);
  assert.deepEqual(t.json.tokens, [13225, 2375]);
  assert.equal(t.json.count, 2);
  assert.equal(t.json.max_model_len, MAX_LEN);
  const d = await post(base, '/detokenize', { model: MODEL, tokens: [13225, 2375] });
  assert.equal(d.json.prompt, 'Hello world');
});

test('errors: auth, unknown model, context length, malformed JSON, wrong types', async ({ base, client }) => {
  const bad = new OpenAI({ baseURL: base + '/v1', apiKey: 'wrong', maxRetries: 0 });
  await expectError(bad.models.list(), 401);
  await expectError(client.chat.completions.create({ ...chatBody(), model: 'no-such-model' }), 404,
    (e) => assert.match(e.message, /no-such-model/));
  await expectError(client.chat.completions.create(chatBody({ max_tokens: MAX_LEN })), 400, (e) => {
    assert.equal(e.code, 'context_length_exceeded');
    assert.match(e.message, new RegExp(`maximum context length is ${MAX_LEN} tokens`));
  });
  await expectError(client.completions.create({ model: MODEL, prompt: 'hello '.repeat(5000), max_tokens: 4 }), 400,
    (e) => assert.equal(e.code, 'context_length_exceeded'));
  const malformed = await post(base, '/v1/chat/completions', '{"messages": [', { raw: true });
  assert.equal(malformed.status, 400);
  assert.match(malformed.json.error.message, /not valid JSON/);
  for (const [field, value] of [['temperature', 'hot'], ['max_tokens', 'many'], ['stream', 'yes'], ['n', 0],
    ['messages', 'hi'], ['stop', 5]]) {
    const r = await post(base, '/v1/chat/completions', { ...chatBody(), [field]: value });
    assert.equal(r.status, 400, `${field}=${JSON.stringify(value)} gives 400`);
    assert.ok(r.json.error && typeof r.json.error.message === 'string', `${field}: OpenAI error body`);
  }
  await expectError(client.chat.completions.create({ model: MODEL, messages: [] }), 400);
});

test('hostile inputs: deep schemas, a non-object reasoning, wrong nested types get 400 and the server lives', async ({ base }) => {
  // #27: nested schemas overflowed the stack in the schema renderer; reasoning: null aborted a stream.
  const nest = (n, open, close, leaf) => open.repeat(n) + leaf + close.repeat(n);
  const leaf = '{"type":"string"}';
  const schemas = [nest(15000, '{"type":"array","items":', '}', leaf),
    nest(33000, '{"type":"object","properties":{"a":', '}}', leaf), nest(100000, '{"anyOf":[', ']}', leaf)];
  const user = '"messages":[{"role":"user","content":"hi"}]';
  for (const schema of schemas) {
    const tool = `{"type":"function","function":{"name":"f","parameters":${schema}}}`;
    for (const [route, body] of [
      ['/tokenize', `{${user},"tools":[${tool}]}`],
      ['/v1/chat/completions', `{${user},"max_tokens":1,"tools":[${tool}]}`],
      ['/v1/chat/completions', `{${user},"max_tokens":1,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${schema}}}}`],
      ['/v1/responses', `{"input":"hi","max_output_tokens":1,"tools":[{"type":"function","name":"f","parameters":${schema}}]}`]]) {
      const r = await post(base, route, body, { raw: true });
      assert.equal(r.status, 400, `${route} with a ${schema.length}-byte schema`);
      assert.match(r.json.error.message, /deeper than \d+ levels/);
    }
  }
  // Deep but within the limit: tokenized (the schema renders), not refused.
  const ok = await post(base, '/tokenize', `{${user},"tools":[{"type":"function","function":{"name":"f","parameters":${
    nest(20, '{"type":"array","items":', '}', leaf)}}}]}`, { raw: true });
  assert.equal(ok.status, 200);
  const responses = (body) => fetch(base + '/v1/responses', { method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` } });
  for (const stream of [true, false]) {
    const r = await responses({ input: 'hi', reasoning: null, stream, max_output_tokens: 2 });
    assert.equal(r.status, 200, `reasoning: null, stream: ${stream}`);
    const text = await r.text();
    assert.ok(stream ? text.includes('response.completed') || text.includes('response.incomplete') : JSON.parse(text).object === 'response');
    for (const reasoning of ['high', 5, [], { effort: 3 }]) {
      const bad = await responses({ input: 'hi', reasoning, stream, max_output_tokens: 2 });
      assert.equal(bad.status, 400, `reasoning: ${JSON.stringify(reasoning)}, stream: ${stream}`);
    }
  }
  const call = { type: 'function_call', call_id: 'call_1', name: 'f', arguments: '{}' };
  for (const [what, body] of [
    ['text.format.type', { input: 'hi', text: { format: { type: 5 } } }],
    ['tools[].name', { input: 'hi', tools: [{ type: 'function', name: 5 }] }],
    ['input[].role', { input: [{ role: 5, content: 'hi' }] }],
    ['function_call call_id', { input: [{ ...call, call_id: 5 }] }],
    ['function_call name', { input: [{ ...call, name: {} }] }],
    ['response_format name', null]]) {
    const r = body ? await responses({ max_output_tokens: 1, ...body })
      : await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json',
        Authorization: `Bearer ${API_KEY}` }, body: JSON.stringify(chatBody({ response_format: { type: 'json_schema',
        json_schema: { name: 5, schema: { type: 'object' } } } })) });
    assert.equal(r.status, 400, what);
    assert.equal((await r.json()).error.type, 'invalid_request_error', what);
  }
  // Object arguments (as real clients send them) are accepted.
  const objArgs = await responses({ max_output_tokens: 1, input: [{ role: 'user', content: 'hi' },
    { ...call, arguments: { city: 'Paris' } }, { type: 'function_call_output', call_id: 'call_1', output: 'sunny' }] });
  assert.equal(objArgs.status, 200);
  assert.equal((await fetch(base + '/health')).status, 200, 'the server is alive');
});

test('64 concurrent streaming requests all complete', async ({ client }) => {
  const one = async (i) => {
    const stream = await client.chat.completions.create({ model: MODEL, stream: true, max_tokens: 4, temperature: 0,
      stream_options: { include_usage: true }, messages: [{ role: 'user', content: `Request number ${i}` }] });
    let finish = null, usage = null;
    for await (const ch of stream) {
      if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
      if (ch.usage) usage = ch.usage;
    }
    assert.ok(finish, `request ${i} has a finish_reason`);
    assert.ok(usage && usage.completion_tokens >= 1 && usage.completion_tokens <= 4, `request ${i} usage`);
  };
  await Promise.all(Array.from({ length: 64 }, (_, i) => one(i)));
});

test('a client disconnecting mid-stream does not disturb the others', async ({ base, client }) => {
  // Leaves while reading: a completion stream after 3 chunks, a chat stream after its role chunk.
  const readThenAbort = async (create, after) => {
    const controller = new AbortController();
    const stream = await create({ signal: controller.signal });
    let seen = 0;
    try {
      for await (const ch of stream) {
        void ch;
        if (++seen === after) {
          controller.abort();
          break;  // chunks the client had already parsed may still be yielded after abort()
        }
      }
    } catch (e) {
      assert.ok(e.name === 'AbortError' || /abort/i.test(e.message), `aborted: ${e.message}`);
    }
    assert.equal(seen, after);
  };
  const other = client.chat.completions.create(chatBody({ max_tokens: 12 }));
  await readThenAbort((o) => client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 3000,
    temperature: 0, stream: true }, o), 3);
  await readThenAbort((o) => client.chat.completions.create(chatBody({ stream: true, max_tokens: 3000 }), o), 1);
  const r = await other;
  assert.ok(r.usage.completion_tokens >= 1);
  // The server cancels the abandoned request: nothing keeps running.
  let running = -1;
  for (let i = 0; i < 100 && running !== 0; ++i) {
    await new Promise((res) => setTimeout(res, 100));
    const text = await (await fetch(base + '/metrics')).text();
    running = Number(text.match(/^vllm:num_requests_running\{[^}]*\} (\S+)$/m)[1]);
  }
  assert.equal(running, 0, 'the disconnected request was cancelled');
  const metrics = await (await fetch(base + '/metrics')).text();
  for (const name of ['vllm:time_to_first_token_seconds_bucket', 'vllm:generation_tokens_total',
    'vllm:e2e_request_latency_seconds_count', 'vllm:request_success_total'])
    assert.ok(metrics.includes(name), `/metrics has ${name}`);
  assert.match(metrics, /vllm:request_success_total\{[^}]*finished_reason="abort"\} [1-9]/);
  assert.match(metrics, /^vllm:prefix_cache_hits_total\{[^}]*\} [1-9]/m, 'shared chat prefixes hit the prefix cache');
});

await runSuite({ binary, tests, timeoutMs: 300_000,  // sanitizer builds are several times slower
  args: ['--api-key', API_KEY, '--served-model-name', MODEL, '-c', String(MAX_LEN), '-np', '64',
    '--num-gpu-blocks-override', '2048', '--enable-prefix-caching'],
  context: (server) => ({ base: server.base, demo: server.demo,
    client: new OpenAI({ baseURL: server.base + '/v1', apiKey: API_KEY, maxRetries: 0, timeout: 60_000 }) }) });
