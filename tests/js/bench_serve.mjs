// Serving benchmark against a running OpenAI-compatible server (mxserve, vLLM, llama-server) with
// the official openai client: streamed chat requests at several concurrencies, reporting mean and
// p50/p99 TTFT, TPOT (time per output token after the first) and total output throughput.
// Usage: node bench_serve.mjs [--base-url http://127.0.0.1:8000/v1] [--model NAME] [--api-key KEY]
//          [--concurrency 1,8,64] [--requests-per-level 64] [--max-tokens 128] [--prompt-words 256]
//          [--endpoint completions|chat]   (TTFT counts from the first chunk carrying generated text)
import OpenAI from 'openai';

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const baseURL = arg('base-url', 'http://127.0.0.1:8000/v1');
const client = new OpenAI({ baseURL, apiKey: arg('api-key', 'none'), maxRetries: 0, timeout: 600_000 });
const levels = arg('concurrency', '1,8,64').split(',').map(Number);
const perLevel = Number(arg('requests-per-level', '64'));
const maxTokens = Number(arg('max-tokens', '128'));
const promptWords = Number(arg('prompt-words', '256'));
const endpoint = arg('endpoint', 'completions');
const model = arg('model', (await client.models.list()).data[0].id);

const words = ['alpha', 'river', 'stone', 'light', 'market', 'engine', 'cloud', 'garden', 'signal', 'paper'];
const prompt = (i) => Array.from({ length: promptWords }, (_, k) => words[(i * 7 + k * 3) % words.length]).join(' ');

async function one(i) {
  const t0 = performance.now();
  let first = null, last = null, usage = null;
  const common = { model, stream: true, max_tokens: maxTokens, ignore_eos: true, temperature: 0,
    stream_options: { include_usage: true } };
  const stream = endpoint === 'chat'
    ? await client.chat.completions.create({ ...common, messages: [{ role: 'user', content: `${i}: ${prompt(i)}` }] })
    : await client.completions.create({ ...common, prompt: `${i}: ${prompt(i)}` });
  for await (const ch of stream) {
    const now = performance.now();
    const c = ch.choices?.[0];
    const text = c && (c.text || c.delta?.content || c.delta?.reasoning_content || c.delta?.tool_calls);
    if (text) {
      if (first === null) first = now;
      last = now;
    }
    if (ch.usage) usage = ch.usage;
  }
  const n = usage ? usage.completion_tokens : 0;
  return { ttft: (first - t0) / 1000, tpot: n > 1 ? (last - first) / 1000 / (n - 1) : 0, tokens: n };
}

const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
console.log(`model ${model} at ${baseURL} (${endpoint}): ${perLevel} requests per level, ${promptWords} prompt words, ` +
            `${maxTokens} output tokens (ignore_eos)`);
console.log('| concurrency | TTFT mean (ms) | TTFT p99 (ms) | TPOT mean (ms) | TPOT p99 (ms) | output tok/s |');
console.log('|---|---|---|---|---|---|');
for (const c of levels) {
  let next = 0;
  const results = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: c }, async () => {
    while (next < perLevel) results.push(await one(next++));
  }));
  const seconds = (performance.now() - t0) / 1000;
  const ttft = results.map((r) => r.ttft * 1000), tpot = results.map((r) => r.tpot * 1000);
  const tokens = results.reduce((a, r) => a + r.tokens, 0);
  console.log(`| ${c} | ${mean(ttft).toFixed(1)} | ${pct(ttft, 0.99).toFixed(1)} | ${mean(tpot).toFixed(2)} | ` +
              `${pct(tpot, 0.99).toFixed(2)} | ${(tokens / seconds).toFixed(1)} |`);
}
