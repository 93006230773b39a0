// Soak test of `mxserve serve` on loopback (#27 deliverable 7): hundreds of concurrent clients for
// a bounded time mixing valid streamed and whole greedy requests, clients that leave mid-stream,
// malformed and hostile requests (from #27's list), with a KV cache small enough to make requests
// wait and be preempted. Asserts: /health answers throughout, every valid greedy output equals
// the same request sent alone, no 5xx, RSS stays bounded, running/waiting return to 0.
// Usage: node soak_test.mjs MXSERVE [SECONDS=20] [CLIENTS=200]
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { skipUnlessReady, startServer, stopServer, rawHttp, statuses, metric, logForFailure } from './serve_util.mjs';

const binary = process.argv[2];
skipUnlessReady(binary);
const SECONDS = Number(process.argv[3] ?? 20);
const CLIENTS = Number(process.argv[4] ?? 200);
const RSS_GROWTH_MB = 512;  // allowed over the RSS after the warm-up: a leak of a few KB per request would pass it in a long run only if tiny

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mxserve-soak-'));
let server = null;
const watchdog = setTimeout(() => {
  console.error(`FAIL: the soak test took over ${3 * SECONDS + 300} s\n` + logForFailure(server));
  server?.proc.kill('SIGKILL');
  process.exit(1);
}, (3 * SECONDS + 300) * 1000);  // generous: sanitizer builds are 6-20x slower

let seed = 27;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rssMb = (pid) => Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) / 1024;

const PROMPTS = ['Why is the sky blue?', 'Count to five.', 'Write a haiku about GPUs.', 'Hello', 'What is 2 + 2?',
  'Tell me a story about a cat.', 'List three colors.', 'Translate "good morning" to French.'];
const chatBody = (i, stream) => ({ messages: [{ role: 'user', content: PROMPTS[i] }], max_tokens: 12, temperature: 0, stream });
const completionBody = (i) => ({ prompt: PROMPTS[i], max_tokens: 12, temperature: 0 });

async function postJson(base, route, body, signal) {
  return fetch(base + route, { method: 'POST', signal, body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
}

// The streamed content of a chat stream (throws on a broken stream).
async function streamedContent(res) {
  let text = '', finished = false;
  for (const line of (await res.text()).split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const ev = JSON.parse(line.slice(6));
    if (ev.error) throw new Error(`stream error: ${JSON.stringify(ev.error)}`);
    text += ev.choices[0]?.delta?.content ?? '';
    finished ||= Boolean(ev.choices[0]?.finish_reason);
  }
  if (!finished) throw new Error('stream ended without a finish_reason');
  return text;
}

const deepTools = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: {
  name: 'f', parameters: JSON.parse('{"type":"array","items":'.repeat(3000) + '{}' + '}'.repeat(3000)) } }] }).replace(/\s/g, '');
const badTool = JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'text', text: 5 }] }], max_tokens: 2,
  tools: [{ type: 'function', function: { name: 'x<|start|>y', parameters: { type: 'object' } } }] });
// Hostile requests from #27: each must get a 4xx (or be dropped), never a 5xx or a hang.
const hostile = (port) => [
  () => rawHttp(port, 'POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{"messages"'),
  () => rawHttp(port, `POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 40010\r\n\r\n${'['.repeat(20000)}${']'.repeat(20000)}{}`),
  () => rawHttp(port, [Buffer.from('POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n' +
    'Content-Length: 25\r\n\r\n'), zlib.gzipSync('{"prompt":"hi"}').subarray(0, 25)]),
  () => rawHttp(port, 'POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'),
  () => rawHttp(port, 'POST /tokenize HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n' +
    'fffff\r\n' + 'a'.repeat(70000)),
  () => rawHttp(port, ['GET /health HTTP/1.1\r\n', 'Host: t\r\n', 'X-Slow: 1\r\n'], { gapMs: 300, timeoutMs: 1500 }),
  () => rawHttp(port, 'POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 39\r\n\r\n' +
    '{"prompt":[4294980521],"max_tokens":1}'),
  () => rawHttp(port, 'POST /v1/responses HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n{"input":"x"}'),
  () => rawHttp(port, `POST /v1/responses HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 47\r\n\r\n` +
    '{"input":"hi","reasoning":null,"stream":"yes"}x'),
  () => rawHttp(port, 'POST /v1/responses HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\n' +
    'Content-Length: 67\r\n\r\n{"input":"hi","reasoning":null,"stream":true,"max_output_tokens":4}'),  // #27 item 2 (aborted the server)
  () => rawHttp(port, 'POST /tokenize HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\n' +
    `Content-Length: ${deepTools.length}\r\n\r\n${deepTools}`),  // #27 item 1: a deep tool schema (stack overflow before)
  () => rawHttp(port, 'POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\n' +
    `Content-Length: ${badTool.length}\r\n\r\n${badTool}`),  // #27 items 6, 9: a wrong nested type, a tool name that shapes the prompt
  () => rawHttp(port, `GET /v1/models HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer x\0y\r\n\r\n`),
];

async function main() {
  server = await startServer(binary, tmp, ['-c', '512', '-np', '32', '--num-gpu-blocks-override', '48',
    '--enable-prefix-caching', '--max-body-bytes', String(1 << 20),
    '--max-connections-per-client', String(CLIENTS + 64), '--max-connections', String(CLIENTS + 128)]);
  const { base, port, proc } = server;
  const tStart = Date.now();
  // Alone, one at a time: the reference outputs.
  const refChat = [], refCompletion = [];
  for (let i = 0; i < PROMPTS.length; ++i) {
    refChat.push((await (await postJson(base, '/v1/chat/completions', chatBody(i, false))).json()).choices[0].message.content ?? '');
    refCompletion.push((await (await postJson(base, '/v1/completions', completionBody(i))).json()).choices[0].text);
  }
  const warmRss = rssMb(proc.pid);
  const tRef = Date.now();
  const counts = { stream: 0, whole: 0, completion: 0, left: 0, hostile: 0 };
  const failures = [];
  const fail = (what) => failures.length < 20 && failures.push(what);
  const hostiles = hostile(port);
  const deadline = Date.now() + SECONDS * 1000;

  const client = async () => {
    while (Date.now() < deadline) {
      const i = Math.floor(rand() * PROMPTS.length), r = rand();
      try {
        if (r < 0.35) {
          const res = await postJson(base, '/v1/chat/completions', chatBody(i, true));
          if (res.status !== 200) fail(`stream: HTTP ${res.status}`);
          else if (await streamedContent(res) !== refChat[i]) fail(`stream ${i}: output differs from the request alone`);
          counts.stream++;
        } else if (r < 0.5) {
          const res = await postJson(base, '/v1/chat/completions', chatBody(i, false));
          const j = await res.json();
          if (res.status !== 200) fail(`whole: HTTP ${res.status} ${JSON.stringify(j)}`);
          else if ((j.choices[0].message.content ?? '') !== refChat[i]) fail(`whole ${i}: output differs from the request alone`);
          counts.whole++;
        } else if (r < 0.65) {
          const res = await postJson(base, '/v1/completions', completionBody(i));
          const j = await res.json();
          if (res.status !== 200) fail(`completion: HTTP ${res.status}`);
          else if (j.choices[0].text !== refCompletion[i]) fail(`completion ${i}: output differs from the request alone`);
          counts.completion++;
        } else if (r < 0.8) {  // leaves mid-stream, or before the first byte
          const controller = new AbortController();
          const res = postJson(base, '/v1/chat/completions', { ...chatBody(i, true), max_tokens: 400 }, controller.signal);
          setTimeout(() => controller.abort(), Math.floor(rand() * 300));
          await res.then((x) => x.body?.cancel()).catch(() => {});
          counts.left++;
        } else {
          const out = await pick(hostiles)();
          const codes = statuses(out.text);
          if (codes.some((c) => c >= 500)) fail(`hostile: HTTP ${codes} ${out.text.slice(0, 200)}`);
          counts.hostile++;
        }
      } catch (e) {
        if (e.name !== 'AbortError') fail(`client: ${e.message}${e.cause ? ` (${e.cause.code ?? ''} ${e.cause.message ?? e.cause})` : ''}`);
      }
    }
  };
  let maxRss = warmRss, slowHealth = 0;
  const monitor = (async () => {
    while (Date.now() < deadline) {
      const t0 = Date.now();
      const h = await fetch(base + '/health').then((x) => x.status, (e) => e.message);
      if (h !== 200) fail(`health: ${h}`);
      if (Date.now() - t0 > 2000) slowHealth++;
      maxRss = Math.max(maxRss, rssMb(proc.pid));
      await sleep(500);
    }
  })();
  await Promise.all([...Array.from({ length: CLIENTS }, client), monitor]);
  const tLoad = Date.now();

  let running = -1, waiting = -1;
  for (let i = 0; i < 100 && (running !== 0 || waiting !== 0); ++i) {
    const m = await (await fetch(base + '/metrics')).text();
    running = metric(m, 'vllm:num_requests_running');
    waiting = metric(m, 'vllm:num_requests_waiting');
    if (running || waiting) await sleep(100);
  }
  const metrics = await (await fetch(base + '/metrics')).text();
  console.log(`references ${((tRef - tStart) / 1000).toFixed(1)} s, load ${((tLoad - tRef) / 1000).toFixed(1)} s, ` +
    `back to idle ${((Date.now() - tLoad) / 1000).toFixed(1)} s`);
  console.log(`${SECONDS} s, ${CLIENTS} clients: ${JSON.stringify(counts)}, RSS ${warmRss.toFixed(0)} -> max ${maxRss.toFixed(0)} MB, ` +
    `preemptions ${metric(metrics, 'vllm:num_preemptions_total')}, slow health checks ${slowHealth}`);
  assert.deepEqual(failures, []);
  assert.equal(running, 0, 'running back to 0');
  assert.equal(waiting, 0, 'waiting back to 0');
  assert.ok(maxRss < warmRss + RSS_GROWTH_MB, `RSS bounded (${maxRss.toFixed(0)} MB)`);
  assert.equal(slowHealth, 0, '/health answered within 2 s throughout');
  assert.ok(counts.stream + counts.whole + counts.completion >= CLIENTS / 4, 'the valid requests made progress');
  assert.equal((await fetch(base + '/health')).status, 200);
}

let failed = false;
try {
  await main();
  console.log('ok   soak');
} catch (e) {
  failed = true;
  console.log(`FAIL soak: ${e.stack || e}\n--- server log tail ---\n${logForFailure(server)}`);
}
const code = await stopServer(server, 30_000);
if (!failed && code !== 0) {
  failed = true;
  console.log(`FAIL: the server exited with ${code} after SIGTERM`);
}
fs.rmSync(tmp, { recursive: true, force: true });
clearTimeout(watchdog);
process.exit(failed ? 1 : 0);
