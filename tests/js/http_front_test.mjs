// The HTTP front of `mxserve serve` over raw sockets (#27 items 4, 5, 8, 9, 10): chunked and
// compressed bodies against the body limit, slow clients against the header deadline and the
// connection limits (several loopback addresses act as several clients), pipelining, HTTP/1.1
// framing errors, the API key on every working route and the JSON Content-Type.
// Usage: node http_front_test.mjs MXSERVE
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { skipUnlessReady, runSuite, stopServer, rawHttp, statuses, metric } from './serve_util.mjs';

const binary = process.argv[2];
skipUnlessReady(binary);

const KEY = 'k';
const MAX_BODY = 1 << 20;
const HEADER_TIMEOUT_S = 2;
const PER_CLIENT = 32;
const TOTAL = 80;
const auth = `Authorization: Bearer ${KEY}\r\n`;
const head = (method, route, fields = '') => `${method} ${route} HTTP/1.1\r\nHost: t\r\n${fields}`;
const jsonPost = (route, body, fields = '') =>
  head('POST', route, `${auth}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${fields}\r\n`) + body;
const chunked = (body, size) => {
  let out = '';
  for (let i = 0; i < body.length; i += size) out += `${Math.min(size, body.length - i).toString(16)}\r\n${body.slice(i, i + size)}\r\n`;
  return out + '0\r\n\r\n';
};
const bodyOf = (text) => JSON.parse(text.slice(text.lastIndexOf('\r\n\r\n') + 4));

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('chunked bodies count against --max-body-bytes after de-chunking', async ({ port }) => {
  const small = JSON.stringify({ prompt: 'Hello world' });
  const ok = await rawHttp(port, head('POST', '/tokenize', `${auth}Content-Type: application/json\r\n` +
    'Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n') + chunked(small, 7));
  assert.deepEqual(statuses(ok.text), [200], ok.text);
  assert.deepEqual(bodyOf(ok.text).tokens, [13225, 2375]);
  // 1.5 MiB of prompt in 64 KiB chunks: refused as soon as the total passes the limit.
  const big = JSON.stringify({ prompt: 'a '.repeat(786_432) });
  const r = await rawHttp(port, head('POST', '/tokenize', `${auth}Content-Type: application/json\r\n` +
    'Transfer-Encoding: chunked\r\n\r\n') + chunked(big, 65536), { timeoutMs: 10_000 });
  assert.deepEqual(statuses(r.text), [413], r.text.slice(0, 300));
  assert.match(r.text, /larger than 1048576 bytes/);
});

test('Content-Encoding gzip, deflate and br are refused with 415, never inflated', async ({ port }) => {
  // As in #27 (200 MB of prompt in 204 KB of gzip), smaller: 20 MB in 20 KB.
  const bomb = zlib.gzipSync(Buffer.from(JSON.stringify({ prompt: 'a'.repeat(20_000_000) })), { level: 9 });
  for (const [coding, data] of [['gzip', bomb], ['deflate', zlib.deflateSync('{"prompt":"hi"}')],
    ['br', zlib.brotliCompressSync('{"prompt":"hi"}')]]) {
    const r = await rawHttp(port, [Buffer.from(head('POST', '/tokenize', `${auth}Content-Type: application/json\r\n` +
      `Content-Encoding: ${coding}\r\nContent-Length: ${data.length}\r\n\r\n`)), data]);
    assert.deepEqual(statuses(r.text), [415], `${coding}: ${r.text.slice(0, 200)}`);
    assert.match(r.text, /Accept-Encoding: identity/);
  }
});

// `n` sockets from `addr` that send a request head one field every 400 ms and never finish it.
const slowloris = (port, addr, n) => Array.from({ length: n }, () => rawHttp(port,
  [head('POST', '/v1/chat/completions'), ...Array(30).fill('X-Slow: 1\r\n')],
  { localAddress: addr, gapMs: 400, timeoutMs: 10_000 }));

test('slowloris from one address: per-client limit, header deadline, the others are served', async ({ port, base }) => {
  const t0 = Date.now();
  const attack = slowloris(port, '127.0.0.2', 100);
  await new Promise((r) => setTimeout(r, 500));
  const h0 = Date.now();
  assert.equal((await fetch(base + '/health')).status, 200);
  assert.ok(Date.now() - h0 < 1000, 'health answers at once during the attack');
  const chat = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json',
    Authorization: `Bearer ${KEY}` }, body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }) });
  assert.equal(chat.status, 200);
  const results = await Promise.all(attack);
  const codes = results.map((r) => statuses(r.text)[0] ?? r.error);
  assert.equal(codes.filter((c) => c === 408).length, PER_CLIENT, `admitted ones time out: ${codes}`);
  assert.ok(codes.every((c) => [408, 429, 'ECONNRESET', 'EPIPE'].includes(c)), `${codes}`);
  assert.ok(codes.filter((c) => c === 429).length > 0, 'the rest are refused with 429');
  assert.ok(Date.now() - t0 < (HEADER_TIMEOUT_S + 2) * 1000, `all ended by the header deadline (${Date.now() - t0} ms)`);
});

test('--max-connections caps all clients together with 503', async ({ port }) => {
  const attack = ['127.0.0.2', '127.0.0.3', '127.0.0.4'].flatMap((a) => slowloris(port, a, 30));
  const codes = (await Promise.all(attack)).map((r) => statuses(r.text)[0] ?? r.error);
  // fetch's kept-alive connections of the test before may still count against the total.
  const admitted = codes.filter((c) => c === 408).length;
  assert.ok(admitted <= TOTAL && admitted >= TOTAL - 4, `${admitted} admitted: ${codes}`);
  assert.ok(codes.filter((c) => c === 503).length > 0, `${codes}`);
  // A refused client reads its 503 (the server lingers): never a reset instead of the answer.
  assert.ok(codes.every((c) => c === 408 || c === 503), `${codes}`);
});

test('a client refused at accept reads its answer even while it is still sending a body', async ({ port }) => {
  const hold = ['127.0.0.2', '127.0.0.3', '127.0.0.4'].flatMap((a) => slowloris(port, a, 30));
  await new Promise((r) => setTimeout(r, 500));  // every seat taken
  const n = 400_000;
  const big = `POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${n}\r\n\r\n`;
  const refused = await Promise.all(Array.from({ length: 6 }, () =>
    rawHttp(port, [big, 'x'.repeat(n / 2), 'x'.repeat(n / 2)], { localAddress: '127.0.0.5', gapMs: 20 })));
  for (const r of refused) assert.deepEqual(statuses(r.text), [503], `${r.error ?? ''} ${r.text.slice(0, 120)}`);
  await Promise.all(hold);
});

test('pipelined requests are all answered, in order', async ({ port }) => {
  const r = await rawHttp(port, head('GET', '/health', '\r\n') + jsonPost('/tokenize', '{"prompt":"Hello world"}') +
    head('GET', '/v1/models', `${auth}Connection: close\r\n\r\n`));
  assert.deepEqual(statuses(r.text), [200, 200, 200], r.text);
  assert.match(r.text, /"tokens":\[13225,2375\]/);
  assert.match(r.text, /"object":"list"/);
});

test('HTTP/1.1 framing: ambiguous or unknown framing is refused', async ({ port }) => {
  const body = '{"prompt":"hi"}';
  const post = (fields) => head('POST', '/tokenize', `${auth}Content-Type: application/json\r\n${fields}\r\n`);
  for (const [what, bytes, want] of [
    ['Transfer-Encoding with Content-Length', post(`Content-Length: 20\r\nTransfer-Encoding: chunked\r\n`) + chunked(body, 100), 400],
    ['unknown transfer coding', post('Transfer-Encoding: gzip, chunked\r\n') + chunked(body, 100), 501],
    ['transfer coding not ending in chunked', post('Transfer-Encoding: gzip\r\n') + body, 400],
    ['Content-Length: +N', post(`Content-Length: +${body.length}\r\n`) + body, 400],
    ['two Content-Lengths', post(`Content-Length: ${body.length}\r\nContent-Length: 3\r\n`) + body, 400],
    ['NUL after the key', head('GET', '/v1/models', `Authorization: Bearer ${KEY}\0junk\r\n\r\n`), 400],
    ['bare LF', 'GET /health HTTP/1.1\nHost: t\n\n', 400],
    ['HTTP/2.0 request line', 'GET /health HTTP/2.0\r\nHost: t\r\n\r\n', 505],
    ['40 KB of headers', head('GET', '/health', `X-Big: ${'a'.repeat(40_000)}\r\n\r\n`), 431]]) {
    const r = await rawHttp(port, bytes);
    assert.deepEqual(statuses(r.text), [want], `${what}: ${r.text.slice(0, 200)}`);
    assert.ok(r.closed, `${what}: the connection is closed after the error`);
  }
  const cont = await rawHttp(port, [post(`Expect: 100-continue\r\nContent-Length: ${body.length}\r\nConnection: close\r\n`), body],
    { gapMs: 300 });
  assert.deepEqual(statuses(cont.text), [100, 200], cont.text);
});

test('--api-key covers /tokenize, /detokenize and /v1/*; /health, /metrics, the pages stay open', async ({ base }) => {
  for (const [route, body] of [['/tokenize', { prompt: 'hi' }], ['/detokenize', { tokens: [1] }],
    ['/v1/completions', { prompt: 'hi', max_tokens: 1 }]]) {
    for (const key of [null, 'wrong', `${KEY}x`]) {
      const headers = { 'Content-Type': 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}) };
      const r = await fetch(base + route, { method: 'POST', headers, body: JSON.stringify(body) });
      assert.equal(r.status, 401, `${route} with key ${key}`);
    }
  }
  for (const route of ['/health', '/metrics', '/metrics.json', '/', '/dashboard', '/assets/chat.js'])
    assert.equal((await fetch(base + route)).status, 200, route);
});

test('JSON routes need Content-Type application/json (415), form bodies too', async ({ base }) => {
  const chat = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
  for (const [type, body] of [['text/plain', chat], ['text/plain;charset=UTF-8', chat], [null, chat],
    ['application/x-www-form-urlencoded', 'a=' + 'b'.repeat(10_000)], ['multipart/form-data; boundary=x', '--x--']]) {
    const headers = { Authorization: `Bearer ${KEY}`, ...(type ? { 'Content-Type': type } : {}) };
    const r = await fetch(base + '/v1/chat/completions', { method: 'POST', headers, body: type ? body : new Blob([body]) });
    assert.equal(r.status, 415, `Content-Type ${type}`);
    assert.match((await r.json()).error.message, /application\/json/);
  }
});

test('a non-streaming request is cancelled when its client disconnects', async ({ base }) => {
  const controller = new AbortController();
  const pending = fetch(base + '/v1/completions', { method: 'POST', signal: controller.signal, body: JSON.stringify(
    { prompt: 'hi', max_tokens: 1000, ignore_eos: true }), headers: { 'Content-Type': 'application/json',
    Authorization: `Bearer ${KEY}` } }).catch((e) => e.name);
  const running = async () => metric(await (await fetch(base + '/metrics')).text(), 'vllm:num_requests_running');
  for (let i = 0; i < 50 && await running() !== 1; ++i) await new Promise((r) => setTimeout(r, 20));
  assert.equal(await running(), 1, 'the request runs');
  controller.abort();
  assert.equal(await pending, 'AbortError');
  const t0 = Date.now();
  while (await running() !== 0 && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await running(), 0, 'cancelled within 3 s of the disconnect (1000 tokens take ~30 s)');
});

// Last: stops the server (started with --shutdown-timeout 5).
test('SIGTERM: running requests finish, long ones are cancelled at --shutdown-timeout, the process exits', async (srv) => {
  const post = (body) => fetch(srv.base + '/v1/completions', { method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` } });
  const long = post({ prompt: 'hi', max_tokens: 1000, ignore_eos: true }).then((r) => r.status, (e) => e.message);
  const longStream = rawHttp(srv.port, jsonPost('/v1/completions', JSON.stringify({ prompt: 'hi', max_tokens: 1000,
    ignore_eos: true, stream: true })), { timeoutMs: 20_000 });
  // The short request streams; SIGTERM comes once its first token is out, so it is surely running (a
  // loaded sanitizer build can take a second per step: 3 more tokens fit the 5 s drain).
  const reader = (await post({ prompt: 'hi', max_tokens: 4, ignore_eos: true, stream: true })).body.getReader();
  const decoder = new TextDecoder();
  let shortText = '';
  while (!shortText.includes('data: ')) {
    const { value, done } = await reader.read();
    if (done) break;
    shortText += decoder.decode(value, { stream: true });
  }
  const shortRest = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return shortText;
        shortText += decoder.decode(value, { stream: true });
      }
    } catch (e) { return shortText + `\n(read failed: ${e.message})`; }
  })();
  const t0 = Date.now();
  const code = await stopServer(srv, 15_000);
  assert.equal(code, 0, 'clean exit');
  assert.ok(Date.now() - t0 < 8000, `exited ${Date.now() - t0} ms after SIGTERM (drain 5 s)`);
  assert.match(await shortRest, /data: \[DONE\]/, 'the short request finished during the drain');
  assert.notEqual(await long, 200, 'the long request was cancelled');
  const streamed = await longStream;
  assert.ok(streamed.closed && !streamed.text.includes('data: [DONE]'), 'the long stream was ended');
  assert.match(srv.log(), /still open after 5 s: cancelling/);
});

await runSuite({ binary, tests, timeoutMs: 120_000, args: ['--api-key', KEY, '--max-body-bytes', String(MAX_BODY),
  '--header-timeout', String(HEADER_TIMEOUT_S), '--max-connections-per-client', String(PER_CLIENT),
  '--max-connections', String(TOTAL), '-c', '1024', '--num-gpu-blocks-override', '256', '--shutdown-timeout', '5'] });
