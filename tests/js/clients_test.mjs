// `mxserve serve` on the demo model driven by the client libraries people use: the AI SDK (chat and
// responses providers), LangChain's ChatOpenAI, the openai client's parse/runTools helpers, and one
// Codex CLI turn. The demo model is random, so only protocol facts are checked (statuses, event
// shapes, usage, finish reasons, objects and tool arguments valid against their zod schemas).
// Usage: node clients_test.mjs MXSERVE (MXSERVE_TEST_NO_MAX_REASONING=1: binaries before that flag)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { skipUnlessReady, runSuite } from './serve_util.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const binary = process.argv[2];
skipUnlessReady(binary, ['openai', 'ai', '@ai-sdk/openai', '@langchain/openai', '@langchain/core', 'zod']);
const { z } = await import('zod');
const { generateText, streamText, generateObject, tool, stepCountIs } = await import('ai');
const { createOpenAI } = await import('@ai-sdk/openai');
const { ChatOpenAI } = await import('@langchain/openai');
const { tool: lcTool } = await import('@langchain/core/tools');
const { default: OpenAI } = await import('openai');
const { zodResponseFormat, zodTextFormat, zodFunction } = await import('openai/helpers/zod');

const API_KEY = 'test-key';
const MODEL = 'demo';
const MAX_TEXT = 24;     // plain text calls: enough for the 8 reasoning tokens and some answer
const MAX_GUIDED = 200;  // structured calls: the schemas below close well within this
// A call forced by a named tool_choice: OpenAI's API ends it with finish_reason "stop", others "tool_calls".
const FORCED_FINISH = ['tool_calls', 'stop'];

// A string enum, a bounded integer, a boolean: every value short, so a guided object ends soon.
const Ticket = z.object({ mood: z.enum(['calm', 'busy', 'tired']), count: z.number().int().min(1).max(10),
  urgent: z.boolean() });
const Weather = z.object({ city: z.enum(['Paris', 'Oslo', 'Lima']), days: z.number().int().min(1).max(7) });

function validates(schema, value, what) {
  const r = schema.safeParse(value);
  assert.ok(r.success, `${what} does not match its schema: ${JSON.stringify(value)}\n${r.error?.message}`);
}

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

// --- AI SDK -----------------------------------------------------------------------------------

// usage of one AI SDK call (LanguageModelUsage) whose output was capped at `max` tokens.
function checkSdkUsage(usage, max) {
  assert.ok(usage.inputTokens > 0, `inputTokens ${usage.inputTokens}`);
  assert.ok(usage.outputTokens >= 1 && usage.outputTokens <= max, `outputTokens ${usage.outputTokens}`);
  assert.equal(usage.totalTokens, usage.inputTokens + usage.outputTokens);
}

const sdkProviders = [['chat', (p) => p.chat(MODEL)], ['responses', (p) => p.responses(MODEL)]];

for (const [kind, model] of sdkProviders) {
  test(`ai-sdk ${kind}: generateText`, async ({ sdk }) => {
    const r = await generateText({ model: model(sdk), prompt: 'Why is the sky blue?', maxOutputTokens: MAX_TEXT,
      temperature: 0 });
    assert.equal(typeof r.text, 'string');
    assert.ok(r.text.length > 0, 'an answer arrives');
    assert.ok(['length', 'stop'].includes(r.finishReason), r.finishReason);
    checkSdkUsage(r.usage, MAX_TEXT);
    assert.equal(r.response.modelId, MODEL);
    assert.ok(r.response.id, 'response id');
  });

  test(`ai-sdk ${kind}: streamText`, async ({ sdk }) => {
    const r = streamText({ model: model(sdk), prompt: 'Why is the sky blue?', maxOutputTokens: MAX_TEXT, temperature: 0 });
    const types = [];
    let text = '';
    for await (const part of r.fullStream) {
      if (part.type === 'error') throw part.error;
      types.push(part.type);
      if (part.type === 'text-delta') text += part.text;
    }
    for (const t of ['start', 'start-step', 'text-start', 'text-delta', 'text-end', 'finish-step', 'finish'])
      assert.ok(types.includes(t), `no '${t}' part in ${[...new Set(types)]}`);
    assert.equal(types.at(-1), 'finish');
    assert.ok(text.length > 0, 'text deltas arrive');
    assert.equal(await r.text, text);
    assert.ok(['length', 'stop'].includes(await r.finishReason));
    checkSdkUsage(await r.usage, MAX_TEXT);
  });

  test(`ai-sdk ${kind}: tool loop over two steps, the tool forced on the first`, async ({ sdk }) => {
    const calls = [];
    const r = await generateText({ model: model(sdk), prompt: 'What is the weather in Paris for the next 3 days?',
      maxOutputTokens: MAX_GUIDED, temperature: 0, stopWhen: stepCountIs(2),
      tools: { get_weather: tool({ description: 'Weather forecast for a city', inputSchema: Weather,
        execute: async (args) => { calls.push(args); return { temp_c: 21, sky: 'clear' }; } }) },
      prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? { type: 'tool', toolName: 'get_weather' } : 'none' }) });
    assert.equal(r.steps.length, 2);
    const [first, second] = r.steps;
    assert.ok(['tool-calls', 'stop'].includes(first.finishReason), first.finishReason);  // see FORCED_FINISH
    assert.equal(first.toolCalls.length, 1);
    assert.equal(first.toolCalls[0].toolName, 'get_weather');
    validates(Weather, first.toolCalls[0].input, 'get_weather arguments');
    assert.equal(calls.length, 1, 'execute ran once');
    assert.deepEqual(first.toolResults.map((t) => t.output), [{ temp_c: 21, sky: 'clear' }]);
    assert.ok(['stop', 'length'].includes(second.finishReason), second.finishReason);
    assert.equal(second.toolCalls.length, 0);
    const sent = JSON.stringify(second.request.body);
    assert.ok(sent.includes(first.toolCalls[0].toolCallId), 'the second request carries the tool call and result');
    for (const s of r.steps) checkSdkUsage(s.usage, MAX_GUIDED);
    assert.equal(r.totalUsage.outputTokens, first.usage.outputTokens + second.usage.outputTokens);
  });

  test(`ai-sdk ${kind}: generateObject`, async ({ sdk }) => {
    const r = await generateObject({ model: model(sdk), schema: Ticket, schemaName: 'ticket',
      prompt: 'Describe the support queue as a ticket.', maxOutputTokens: MAX_GUIDED, temperature: 0 });
    validates(Ticket, r.object, 'generateObject object');
    assert.equal(r.finishReason, 'stop');
    checkSdkUsage(r.usage, MAX_GUIDED);
  });
}

// --- LangChain --------------------------------------------------------------------------------

// usage_metadata of a LangChain AIMessage.
function checkLcUsage(u, max) {
  assert.ok(u, 'usage_metadata');
  assert.ok(u.input_tokens > 0 && u.output_tokens >= 1 && u.output_tokens <= max, JSON.stringify(u));
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
}

// The parsed value of withStructuredOutput(..., { includeRaw: true }) (null when its parser failed:
// the raw message then says why).
function lcParsed(r, what) {
  const raw = r.raw.tool_calls?.length ? JSON.stringify(r.raw.tool_calls) : r.raw.content;
  assert.ok(r.parsed != null, `${what}: LangChain could not parse the output: ${raw}`);
  return r.parsed;
}

test('langchain: invoke', async ({ lc }) => {
  const m = await lc.invoke('Why is the sky blue?');
  assert.equal(typeof m.content, 'string');
  assert.ok(m.content.length > 0, 'an answer arrives');
  assert.ok(['length', 'stop'].includes(m.response_metadata.finish_reason), m.response_metadata.finish_reason);
  assert.equal(m.response_metadata.model_name, MODEL);
  checkLcUsage(m.usage_metadata, MAX_TEXT);
});

test('langchain: stream', async ({ lc }) => {
  let whole = null, n = 0;
  for await (const chunk of await lc.stream('Why is the sky blue?')) {
    whole = whole ? whole.concat(chunk) : chunk;
    n++;
  }
  assert.ok(n > 2, `${n} chunks`);
  assert.ok(whole.content.length > 0, 'content chunks arrive');
  assert.ok(['length', 'stop'].includes(whole.response_metadata.finish_reason), whole.response_metadata.finish_reason);
  checkLcUsage(whole.usage_metadata, MAX_TEXT);
});

test('langchain: bindTools with tool_choice forced', async ({ lcGuided }) => {
  const getWeather = lcTool(async () => 'sunny', { name: 'get_weather', description: 'Weather forecast for a city',
    schema: Weather });
  const m = await lcGuided.bindTools([getWeather], { tool_choice: 'get_weather' }).invoke('Weather in Paris?');
  assert.equal(m.tool_calls.length, 1, `tool calls: ${JSON.stringify(m.tool_calls)}, invalid: ${JSON.stringify(m.invalid_tool_calls)}`);
  assert.equal(m.tool_calls[0].name, 'get_weather');
  assert.ok(m.tool_calls[0].id, 'tool call id');
  validates(Weather, m.tool_calls[0].args, 'get_weather arguments');
  assert.ok(FORCED_FINISH.includes(m.response_metadata.finish_reason), m.response_metadata.finish_reason);
  checkLcUsage(m.usage_metadata, MAX_GUIDED);
});

for (const method of ['functionCalling', 'jsonSchema']) {
  test(`langchain: withStructuredOutput method ${method}`, async ({ lcGuided }) => {
    const r = await lcGuided.withStructuredOutput(Ticket, { name: 'ticket', method, includeRaw: true })
      .invoke('Describe the support queue as a ticket.');
    validates(Ticket, lcParsed(r, method), `${method} output`);
    if (method === 'functionCalling') assert.equal(r.raw.tool_calls[0].name, 'ticket');
    checkLcUsage(r.raw.usage_metadata, MAX_GUIDED);
  });
}

// json_object guarantees a JSON object, not the schema's keys (the prompt asks for them; the random
// model does not read it), so only the object is checked.
test('langchain: withStructuredOutput method jsonMode', async ({ lcGuided }) => {
  const r = await lcGuided.withStructuredOutput(Ticket, { name: 'ticket', method: 'jsonMode', includeRaw: true })
    .invoke('Reply in JSON with keys mood, count, urgent.');
  let value;
  assert.doesNotThrow(() => { value = JSON.parse(r.raw.content); }, `not JSON: ${r.raw.content}`);
  assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), `not an object: ${r.raw.content}`);
  assert.equal(r.raw.response_metadata.finish_reason, 'stop');
  checkLcUsage(r.raw.usage_metadata, MAX_GUIDED);
});

// --- openai client helpers ----------------------------------------------------------------------

test('openai: chat.completions.parse with zodResponseFormat', async ({ client }) => {
  const r = await client.chat.completions.parse({ model: MODEL, max_tokens: MAX_GUIDED, temperature: 0,
    messages: [{ role: 'user', content: 'Describe the support queue as a ticket.' }],
    response_format: zodResponseFormat(Ticket, 'ticket') });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'stop');
  validates(Ticket, c.message.parsed, 'message.parsed');
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('openai: responses.parse with zodTextFormat', async ({ client }) => {
  const r = await client.responses.parse({ model: MODEL, max_output_tokens: MAX_GUIDED, temperature: 0,
    input: 'Describe the support queue as a ticket.', text: { format: zodTextFormat(Ticket, 'ticket') } });
  assert.equal(r.status, 'completed', `status ${r.status} ${JSON.stringify(r.incomplete_details)}`);
  validates(Ticket, r.output_parsed, 'output_parsed');
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
});

test('openai: chat.completions.runTools with a zod function tool', async ({ client }) => {
  const calls = [];
  const runner = client.chat.completions.runTools({ model: MODEL, max_tokens: MAX_GUIDED, temperature: 0,
    messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
    tools: [zodFunction({ name: 'get_weather', parameters: Weather, description: 'Weather forecast for a city',
      function: (args) => { calls.push(args); return { temp_c: 3 }; } })],
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  await runner.done();
  // A named tool_choice: the runner calls the function once and does not ask again.
  assert.equal(runner.allChatCompletions().length, 1);
  const toolMessages = runner.messages.filter((m) => m.role === 'tool');
  assert.equal(calls.length, 1, `the function ran (tool messages: ${JSON.stringify(toolMessages)})`);
  validates(Weather, calls[0], 'get_weather arguments');
  assert.equal(toolMessages.length, 1);
  assert.equal(toolMessages[0].content, JSON.stringify({ temp_c: 3 }));
  assert.ok((await runner.totalUsage()).completion_tokens >= 1);
});

test('openai: models.retrieve', async ({ client }) => {
  const m = await client.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  assert.equal(m.object, 'model');
  assert.equal(typeof m.created, 'number');
  assert.equal(typeof m.owned_by, 'string');
});

// --- Codex CLI ----------------------------------------------------------------------------------

// Forwards to the server and records each request. Codex has no output-token setting, so the proxy
// adds max_output_tokens to bound the turn (the random model rarely ends on its own).
function startBoundingProxy(base, maxOutputTokens) {
  const seen = [];
  const target = new URL(base);
  const proxy = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      const entry = { method: req.method, url: req.url, encoding: req.headers['content-encoding'] ?? null, status: 0 };
      if (body.length && !entry.encoding) {
        entry.json = JSON.parse(body.toString());
        body = Buffer.from(JSON.stringify({ max_output_tokens: maxOutputTokens, ...entry.json }));
      }
      seen.push(entry);
      const headers = { ...req.headers, host: target.host, 'content-length': String(body.length) };
      const up = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers },
        (r) => { entry.status = r.statusCode; res.writeHead(r.statusCode, r.headers); r.pipe(res); });
      up.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
      up.end(body);
    });
  });
  return new Promise((resolve) => proxy.listen(0, '127.0.0.1', () =>
    resolve({ base: `http://127.0.0.1:${proxy.address().port}`, seen, close: () => proxy.close() })));
}

function runProcess(cmd, args, { env, timeoutMs }) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, stdout, stderr }); });
  });
}

const codexJs = path.join(here, 'node_modules/@openai/codex/bin/codex.js');

test('codex exec: one turn through a custom provider, output schema', async ({ base, tmp }) => {
  const version = fs.existsSync(codexJs) ? await runProcess(process.execPath, [codexJs, '--version'], { timeoutMs: 20_000 }) : null;
  if (version?.code !== 0) {
    console.log(`     (codex skipped: its binary does not run here: ${version ? version.stderr.trim() : 'not installed'})`);
    return;
  }
  const proxy = await startBoundingProxy(base, MAX_GUIDED);
  const dir = fs.mkdtempSync(path.join(tmp, 'codex-'));
  const [home, work] = [path.join(dir, 'home'), path.join(dir, 'work')];
  fs.mkdirSync(home);
  fs.mkdirSync(work);
  const schemaFile = path.join(dir, 'schema.json'), lastFile = path.join(dir, 'last.txt');
  const instructionsFile = path.join(dir, 'instructions.md');
  fs.writeFileSync(schemaFile, JSON.stringify(z.toJSONSchema(Ticket)));
  fs.writeFileSync(instructionsFile, 'You are a coding agent. Answer briefly.');
  // The README's provider, given on the command line; sub-agents (a 'namespace' tool) and web search
  // (a hosted tool) are off: the server takes function tools only. Short instructions bring the
  // prompt from ~5,400 tokens to ~1,800 (the sanitizer builds prefill it several times slower).
  const config = [`model_provider="mxserve"`, `model="${MODEL}"`, `model_providers.mxserve.name="mxserve"`,
    `model_providers.mxserve.base_url="${proxy.base}/v1"`, `model_providers.mxserve.env_key="MXSERVE_API_KEY"`,
    `model_providers.mxserve.wire_api="responses"`, 'model_providers.mxserve.request_max_retries=0',
    'model_providers.mxserve.stream_max_retries=0', 'web_search="disabled"', 'agents.enabled=false',
    `model_instructions_file="${instructionsFile}"`, 'include_environment_context=false',
    'check_for_update_on_startup=false', 'analytics.enabled=false'];
  const r = await runProcess(process.execPath, [codexJs, 'exec', '--json', '--ephemeral', '--ignore-user-config',
    '--skip-git-repo-check', '--sandbox', 'read-only', '--cd', work, '--output-schema', schemaFile,
    '--output-last-message', lastFile, ...config.flatMap((c) => ['-c', c]), 'Describe the support queue as a ticket.'],
  { env: { ...process.env, CODEX_HOME: home, MXSERVE_API_KEY: API_KEY }, timeoutMs: 90_000 });
  proxy.close();
  const events = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  const log = `exit ${r.code}\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-2000)}`;
  const posts = proxy.seen.filter((s) => s.method === 'POST');
  assert.ok(posts.length >= 1, `codex sent no request\n${log}`);
  for (const s of posts) {
    assert.equal(s.url, '/v1/responses');
    assert.equal(s.encoding, null, 'an uncompressed body');
    assert.equal(s.status, 200, `HTTP ${s.status}\n${log}`);
    assert.equal(s.json.stream, true);
    assert.deepEqual([...new Set(s.json.tools.map((t) => t.type))], ['function']);
    assert.equal(s.json.text?.format?.type, 'json_schema', 'the output schema is sent as text.format');
  }
  assert.ok(!events.some((e) => e.type === 'turn.failed'), `the turn failed\n${log}`);
  const done = events.find((e) => e.type === 'turn.completed');
  assert.ok(done, `no turn.completed\n${log}`);
  assert.ok(done.usage.input_tokens > 0 && done.usage.output_tokens > 0, JSON.stringify(done.usage));
  assert.ok(events.some((e) => e.type === 'item.completed' && e.item.type === 'agent_message'), 'an agent message');
  assert.equal(r.code, 0, log);
  validates(Ticket, JSON.parse(fs.readFileSync(lastFile, 'utf8')), 'codex last message');
});

// --max-reasoning-tokens closes the analysis channel so an answer, object or forced call follows;
// -c fits Codex's prompt (its tool schemas alone are ~1,500 tokens).
const serverArgs = ['--api-key', API_KEY, '--served-model-name', MODEL, '-c', '8192'];
if (!process.env.MXSERVE_TEST_NO_MAX_REASONING) serverArgs.push('--max-reasoning-tokens', '8');

await runSuite({ binary, tests, timeoutMs: 220_000, args: serverArgs,
  context: (server) => {
    const base = server.base;
    const lcOptions = { model: MODEL, apiKey: API_KEY, configuration: { baseURL: base + '/v1' }, temperature: 0,
      maxRetries: 0 };
    return { base, tmp: path.dirname(server.demo),
      sdk: createOpenAI({ baseURL: base + '/v1', apiKey: API_KEY }),
      lc: new ChatOpenAI({ ...lcOptions, maxTokens: MAX_TEXT }),
      lcGuided: new ChatOpenAI({ ...lcOptions, maxTokens: MAX_GUIDED }),
      client: new OpenAI({ baseURL: base + '/v1', apiKey: API_KEY, maxRetries: 0, timeout: 60_000 }) };
  } });
