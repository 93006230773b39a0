// Hostile and careless API inputs (#27 items 6, 7, 9, 11): every nested field of a valid chat,
// completions, responses, tokenize and detokenize body replaced by every JSON type must give 200
// or a 400 that names a request field and carries no internal text (library exception text,
// source file:line); token ids past int32 are refused, not wrapped; unsupported parameters are a
// clear 400; tool names are checked. Usage: node api_inputs_test.mjs MXSERVE
import assert from 'node:assert/strict';
import { skipUnlessReady, runSuite } from './serve_util.mjs';

const binary = process.argv[2];
skipUnlessReady(binary);

const post = async (base, route, body) => {
  const r = await fetch(base + route, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: r.status, json: await r.json().catch(() => null) };
};

const tool = { type: 'function', function: { name: 'get_weather', description: 'd',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
const history = [{ role: 'system', content: 's' }, { role: 'user', content: [{ type: 'text', text: 'hi' }] },
  { role: 'assistant', content: 'a', reasoning_content: 'r', tool_calls: [{ id: 'call_1', type: 'function',
    function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: 'sunny' }] }];
const valid = {
  '/v1/chat/completions': { model: 'demo', messages: history, tools: [tool],
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
    response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' } } },
    stream_options: { include_usage: true }, stop: ['x'], stop_token_ids: [1], max_tokens: 1, temperature: 0,
    reasoning_effort: 'low', logprobs: true, top_logprobs: 1, seed: 1, n: 1 },
  '/v1/completions': { model: 'demo', prompt: [[1, 2], [3]], max_tokens: 1, stop: 'x', logprobs: 1, echo: false,
    stop_token_ids: [1], temperature: 0 },
  '/v1/responses': { model: 'demo', instructions: 'i', max_output_tokens: 1, temperature: 0,
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
      { type: 'reasoning', summary: [{ type: 'summary_text', text: 's' }], content: [{ type: 'reasoning_text', text: 'r' }] },
      { type: 'function_call', call_id: 'c', name: 'get_weather', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c', output: 'o' }],
    tools: [{ type: 'function', name: 'get_weather', description: 'd', parameters: tool.function.parameters }],
    tool_choice: { type: 'function', name: 'get_weather' }, reasoning: { effort: 'low' },
    text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object' } } } },
  '/tokenize': { model: 'demo', messages: history, tools: [tool], return_token_strs: true,
    response_format: { type: 'json_object' } },
  '/detokenize': { model: 'demo', tokens: [1, 2] },
};
const wrong = [null, 5, -1, 1.5, 'x', true, [], {}, [1], { a: 1 }, 4294980521, '<|start|>'];

// Every path to a value in `v` (object keys and array indices), shallow first.
function paths(v, prefix = []) {
  if (v === null || typeof v !== 'object') return [];
  const keys = Array.isArray(v) ? v.map((_, i) => i) : Object.keys(v);
  return keys.flatMap((k) => [[...prefix, k], ...paths(v[k], [...prefix, k])]);
}
function replaced(body, p, value) {
  const copy = structuredClone(body);
  let o = copy;
  for (const k of p.slice(0, -1)) o = o[k];
  o[p.at(-1)] = value;
  return copy;
}

const leaks = /json\.exception|type_error|\.(cpp|h):\d+|\(src\/|what\(\)/;
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('every nested field with every wrong type: 200 or a clean 400', async ({ base }) => {
  // Each path gets 3 of the wrong values, rotating so that every value meets every region of the
  // body (MXSERVE_FULL_SWEEP=1: all of them, 4x the time).
  const pick = (i) => (process.env.MXSERVE_FULL_SWEEP ? wrong : [0, 4, 8].map((j) => wrong[(i + j) % wrong.length]));
  const cases = Object.entries(valid).flatMap(([route, body]) =>
    paths(body).flatMap((p, i) => pick(i).map((w) => ({ route, p, body: replaced(body, p, w), w }))))
    .filter((c) => !(c.w === null && /^max_(output_)?tokens$/.test(c.p[0])));  // null: the whole context, slow
  for (const [route, body] of Object.entries(valid)) assert.equal((await post(base, route, body)).status, 200, route);
  let next = 0, bad = [];
  const worker = async () => {
    while (next < cases.length) {
      const c = cases[next++];
      const r = await post(base, c.route, c.body);
      const where = `${c.route} ${c.p.join('.')} = ${JSON.stringify(c.w)}: ${r.status} ${JSON.stringify(r.json)}`;
      const topKeys = Object.keys(valid[c.route]);
      if (r.status === 404 && c.p[0] === 'model') continue;
      if (r.status === 200) continue;
      if (r.status !== 400 || r.json?.error?.type !== 'invalid_request_error' || leaks.test(r.json.error.message) ||
          !(r.json.error.param === null || topKeys.includes(r.json.error.param))) bad.push(where);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  if (process.env.SHOW_ALL) console.log(bad.join('\n'));
  assert.deepEqual(bad.slice(0, 20), [], `${bad.length} of ${cases.length} cases`);
  assert.equal((await fetch(base + '/health')).status, 200);
});

test('token ids past int32 are refused, not wrapped (4294980521 ran as 13225)', async ({ base }) => {
  for (const prompt of [[4294980521], [13225, 2 ** 32 + 13225], [-1], [2 ** 31], [201088], [1.5]]) {
    const r = await post(base, '/v1/completions', { prompt, max_tokens: 1 });
    assert.equal(r.status, 400, JSON.stringify(prompt));
    assert.equal(r.json.error.param, 'prompt');
  }
  for (const ids of [[4294967297], [-1]]) {
    assert.equal((await post(base, '/v1/completions', { prompt: 'hi', max_tokens: 1, stop_token_ids: ids })).status, 400);
    assert.equal((await post(base, '/detokenize', { tokens: ids })).status, 400);
  }
  assert.equal((await post(base, '/v1/completions', { prompt: [13225], max_tokens: 1 })).status, 200);
});

test('tool names follow ^[A-Za-z0-9_-]{1,64}$; tool errors name tools / tool_choice, without source locations', async ({ base }) => {
  const chat = (extra) => post(base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, ...extra });
  const fn = (name) => ({ type: 'function', function: { name } });
  for (const name of ['get weather', 'a'.repeat(65), '<|call|>', 'f<|channel|>final', 'f\n', 'fn.x', 'é']) {
    const r = await chat({ tools: [fn(name)] });
    assert.equal(r.status, 400, JSON.stringify(name));
    assert.equal(r.json.error.param, 'tools', JSON.stringify(name));
    assert.doesNotMatch(r.json.error.message, /\(src\/|\.cpp:/);
    const hist = await chat({ messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', tool_calls: [{ id: 'c',
      type: 'function', function: { name, arguments: '{}' } }] }, { role: 'tool', tool_call_id: 'c', content: 'x' }] });
    assert.equal(hist.status, 400, `history ${JSON.stringify(name)}`);
    const rf = await chat({ response_format: { type: 'json_schema', json_schema: { name, schema: { type: 'object' } } } });
    assert.equal(rf.status, 400, `response_format ${JSON.stringify(name)}`);
    assert.equal(rf.json.error.param, 'response_format');
  }
  assert.equal((await chat({ tools: [fn('a'.repeat(64))] })).status, 200);
  for (const [extra, param] of [[{ tools: {} }, 'tools'], [{ tools: [5] }, 'tools'], [{ tool_choice: 'sometimes' }, 'tool_choice'],
    [{ tool_choice: 'required' }, 'tool_choice'], [{ tools: [fn('f')], tool_choice: { type: 'function', function: { name: 'g' } } }, 'tool_choice'],
    [{ tool_choice: { type: 'function', function: { name: 'f f' } } }, 'tool_choice']]) {
    const r = await chat(extra);
    assert.equal(r.status, 400, JSON.stringify(extra));
    assert.equal(r.json.error.param, param, JSON.stringify(extra));
  }
  const many = (n) => Array.from({ length: n }, (_, i) => fn(`f${i}`));
  assert.equal((await chat({ tools: many(128) })).status, 200, '--max-tools 128');
  const tooMany = await chat({ tools: many(129) });
  assert.equal(tooMany.status, 400);
  assert.equal(tooMany.json.error.param, 'tools');
  const resp = await post(base, '/v1/responses', { input: 'hi', tools: [{ type: 'function', name: 'a b' }] });
  assert.equal(resp.status, 400);
  assert.equal(resp.json.error.param, 'tools');
});

test('echo works; suffix, best_of, chat text/functions and non-function tools are clear 400s', async ({ base }) => {
  const plain = await post(base, '/v1/completions', { prompt: 'Hello', max_tokens: 3, temperature: 0 });
  const echoed = await post(base, '/v1/completions', { prompt: 'Hello', max_tokens: 3, temperature: 0, echo: true });
  assert.equal(echoed.status, 200);
  assert.equal(echoed.json.choices[0].text, 'Hello' + plain.json.choices[0].text);
  const ids = await post(base, '/v1/completions', { prompt: [13225, 2375], max_tokens: 1, echo: true });
  assert.ok(ids.json.choices[0].text.startsWith('Hello world'));
  const r = await fetch(base + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'Hello', max_tokens: 3, temperature: 0, echo: true, stream: true }) });
  let text = '';
  for (const line of (await r.text()).split('\n'))
    if (line.startsWith('data: {')) text += JSON.parse(line.slice(6)).choices[0]?.text ?? '';
  assert.equal(text, echoed.json.choices[0].text, 'streamed echo');
  assert.equal((await post(base, '/v1/completions', { prompt: 'Hello', max_tokens: 1, echo: true, logprobs: 1 })).status, 400);
  assert.equal((await post(base, '/v1/completions', { prompt: 'Hello', max_tokens: 1, echo: 'yes' })).status, 400);
  for (const [route, extra, param] of [
    ['/v1/completions', { suffix: 'x' }, 'suffix'], ['/v1/completions', { suffix: 5 }, 'suffix'],
    ['/v1/completions', { best_of: 2 }, 'best_of'], ['/v1/completions', { best_of: 'x' }, 'best_of'],
    ['/v1/chat/completions', { text: { format: { type: 'text' } } }, 'text'],
    ['/v1/chat/completions', { functions: [{ name: 'f' }] }, 'functions'],
    ['/v1/chat/completions', { function_call: 'auto' }, 'function_call'],
    ['/v1/chat/completions', { modalities: ['text', 'audio'] }, 'modalities'],
    ['/v1/responses', { tools: [{ type: 'web_search_preview' }] }, 'tools']]) {
    const body = route === '/v1/completions' ? { prompt: 'hi', max_tokens: 1, ...extra }
      : route === '/v1/responses' ? { input: 'hi', max_output_tokens: 1, ...extra }
        : { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, ...extra };
    const res = await post(base, route, body);
    assert.equal(res.status, 400, `${route} ${JSON.stringify(extra)}`);
    assert.equal(res.json.error.param, param, `${route} ${JSON.stringify(extra)}`);
  }
  for (const extra of [{ suffix: '' }, { best_of: 1 }, { suffix: null, best_of: null, echo: false }])
    assert.equal((await post(base, '/v1/completions', { prompt: 'hi', max_tokens: 1, ...extra })).status, 200, JSON.stringify(extra));
  assert.equal((await post(base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1,
    modalities: ['text'] })).status, 200);
});

test('logit_bias and stop_token_ids hold at most 1024 entries', async ({ base }) => {
  const ids = (n) => Array.from({ length: n }, (_, i) => i + 1);
  const body = (extra) => ({ model: 'demo', prompt: 'hi', max_tokens: 1, ...extra });
  for (const [field, value] of [['logit_bias', Object.fromEntries(ids(1025).map((i) => [String(i), 1]))], ['stop_token_ids', ids(1025)]]) {
    const r = await post(base, '/v1/completions', body({ [field]: value }));
    assert.equal(r.status, 400, field);
    assert.equal(r.json.error.param, field);
    assert.match(r.json.error.message, /1025 entries; at most 1024/);
  }
  assert.equal((await post(base, '/v1/completions', body({ logit_bias: Object.fromEntries(ids(1024).map((i) => [String(i), 1])),
    stop_token_ids: ids(1024) }))).status, 200);
});

test('a prompt that renders past --max-prompt-bytes is a clear 400 before it is encoded', async ({ base }) => {
  // 40 KB of JSON in the body, rendered as an indented tool namespace past the 16 KB limit.
  const properties = Object.fromEntries(Array.from({ length: 600 }, (_, i) => [`field_${i}`,
    { type: 'object', properties: { inner: { type: 'string', description: 'nested' } } }]));
  const body = { model: 'demo', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1,
    tools: [{ type: 'function', function: { name: 'wide', parameters: { type: 'object', properties } } }] };
  for (const route of ['/v1/chat/completions', '/tokenize']) {
    const r = await post(base, route, body);
    assert.equal(r.status, 400, route);
    assert.match(r.json.error.message, /rendered prompt has \d+ bytes; at most 16384 .*--max-prompt-bytes/);
  }
  const small = await post(base, '/v1/chat/completions', { ...body, tools: [tool] });
  assert.equal(small.status, 200);
});

test('guided decoding: unenforceable strict schemas and bad budgets are 400s; n choices each follow the schema', async ({ base }) => {
  const chat = (extra) => post(base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 120, ...extra });
  const schemaFormat = (schema, strict) => ({ type: 'json_schema', json_schema: { name: 'x', schema, strict } });
  const bad = await chat({ response_format: schemaFormat({ type: 'object', not: { required: ['a'] } }, true) });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, 'response_format');
  assert.match(bad.json.error.message, /'not'/);
  assert.equal((await chat({ response_format: schemaFormat({ type: 'object', not: {} }, false), max_tokens: 4 })).status, 200,
    'a non-strict schema it cannot enforce is given to the model only');
  const viaResponses = await post(base, '/v1/responses', { input: 'hi', max_output_tokens: 4,
    text: { format: { type: 'json_schema', name: 'x', strict: true, schema: { type: 'object', if: {} } } } });
  assert.equal(viaResponses.status, 400, 'text.format keeps strict');
  for (const budget of [-1, 'x', 1.5, 2 ** 40]) {
    const r = await chat({ max_reasoning_tokens: budget });
    assert.equal(r.status, 400, `max_reasoning_tokens ${budget}`);
    assert.equal(r.json.error.param, 'max_reasoning_tokens');
  }
  const colors = { type: 'object', properties: { color: { enum: ['red', 'green'] }, n: { type: 'integer', minimum: 2, maximum: 5 } },
    required: ['color', 'n'], additionalProperties: false };
  const r = await chat({ n: 3, temperature: 1, seed: 5, max_reasoning_tokens: 4, response_format: schemaFormat(colors, true) });
  assert.equal(r.status, 200);
  assert.equal(r.json.choices.length, 3);
  for (const c of r.json.choices) {
    assert.equal(c.finish_reason, 'stop', JSON.stringify(c));
    const v = JSON.parse(c.message.content);
    assert.ok(['red', 'green'].includes(v.color) && Number.isInteger(v.n) && v.n >= 2 && v.n <= 5, c.message.content);
    assert.deepEqual(Object.keys(v), ['color', 'n']);
  }
});

await runSuite({ binary, tests, timeoutMs: 170_000, args: ['--served-model-name', 'demo', '-c', '2048',
  '--num-gpu-blocks-override', '512', '--enable-prefix-caching', '--max-prompt-bytes', '16384'] });
