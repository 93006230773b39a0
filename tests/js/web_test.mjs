// The web pages of `mxserve serve` in headless Chromium (Debian's chromium, driven by
// playwright-core) against the demo model: the chat page (a two-turn conversation streams and
// survives a reload, edit and regenerate, Markdown with code, tables and math, live reasoning and
// stop on a paced stand-in stream, stop on the server, settings in the request body, export and
// import, the plain-text fallback) and the dashboard (plots fill while requests run, the side
// panel). Screenshots of both pages go to $MXSERVE_SCREENSHOTS, else <build dir>/screenshots.
// Usage: node web_test.mjs MXSERVE
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { skipUnlessReady, runSuite, metric } from './serve_util.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const binary = process.argv[2];
skipUnlessReady(binary);
// MXSERVE_CHROMIUM: a Chromium elsewhere (the GPU machine runs one carried there).
const chromiumPath = [process.env.MXSERVE_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => p && fs.existsSync(p));
if (!chromiumPath || !fs.existsSync(path.join(here, 'node_modules/playwright-core'))) {
  console.log('SKIP: no chromium or playwright-core (run scripts/install-deps.sh --test)');
  process.exit(0);
}
const { chromium } = await import('playwright-core');

const API_KEY = 'web-key';
const shots = process.env.MXSERVE_SCREENSHOTS || path.join(path.dirname(path.resolve(binary)), 'screenshots');
fs.mkdirSync(shots, { recursive: true });
const shot = (page, name, fullPage = false) => page.screenshot({ path: path.join(shots, name), fullPage });

// A fresh browser per test; the page starts with the API key (and `storage`) in localStorage and
// fails the test on any script error.
async function withPage(base, fn, { storage = {}, viewport = { width: 1280, height: 860 }, allow404 = false } = {}) {
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const errors = [];
  try {
    const context = await browser.newContext({ viewport, acceptDownloads: true });
    await context.addInitScript(([key, items]) => {
      if (sessionStorage.getItem('seeded')) return;  // only on the first load: a reload keeps the page's own state
      sessionStorage.setItem('seeded', '1');
      localStorage.setItem('mxserve_key', key);
      for (const [k, v] of Object.entries(items)) localStorage.setItem(k, v);
    }, [API_KEY, storage]);
    const page = await context.newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error' && !(allow404 && /404/.test(m.text()))) errors.push(m.text());
    });
    await fn(page);
    assert.deepEqual(errors, [], 'no script errors on the page');
  } finally {
    await browser.close();
  }
}

const idle = (page, timeout = 60_000) => page.waitForFunction(() => document.getElementById('app').dataset.state === 'idle', null, { timeout });
const modelShown = (page) => page.waitForFunction(() => document.getElementById('model').textContent === 'demo', null, { timeout: 30_000 });
const settings = (s) => JSON.stringify({ temperature: 1, top_p: 1, max_tokens: 8, reasoning_effort: 'low', instructions: '', ...s });

const markdownAnswer = [
  'Here is a function:', '', '```python', 'def add(a, b):', '    return a + b', '```', '',
  '| n | square |', '|---|---|', '| 2 | 4 |', '| 3 | 9 |', '', 'Euler: $e^{i\\pi} + 1 = 0$', '',
  '<img src="http://example.invalid/x.png"> <script>window.pwned = 1</script>',
].join('\n');
const storedConversation = JSON.stringify({ version: 1, current: 'c1', conversations: [{ id: 'c1', title: 'Markdown sample',
  created: 1, updated: 2, messages: [{ role: 'user', content: 'Show me code' },
    { role: 'assistant', content: markdownAnswer, reasoning: 'The user wants code.',
      stats: { ttft_ms: 42, tokens_per_s: 99.5, prompt_tokens: 20, completion_tokens: 60, finish_reason: 'stop' } }] }] });

// A stand-in for the server's chat stream, paced so that a test sees it arrive: reasoning deltas,
// then a Markdown answer with a code block, then (unless `endless`, which keeps sending content
// until the client leaves) the finish chunk, usage and [DONE]. The page's request is rerouted here
// with page.route. Resolves { url, closed: () => whether a client went away mid-stream, close }.
async function pacedStream() {
  let closedEarly = false;
  const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1,
    model: 'demo', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
  const server = http.createServer(async (req, res) => {
    const endless = req.url.includes('endless');
    let open = true;
    res.on('close', () => { if (open) closedEarly = true; open = false; });
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    const send = async (text, ms = 60) => { if (open) res.write(text); await new Promise((r) => setTimeout(r, ms)); };
    await send(chunk({ role: 'assistant', content: '' }));
    for (const w of 'Thinking about which shell command lists files .'.split(' ')) await send(chunk({ reasoning_content: w + ' ' }), 120);
    for (const piece of ['Run:', '\n\n```bash\n', 'ls -la\n', '```\n']) await send(chunk({ content: piece }), 120);
    while (endless && open) await send(chunk({ content: ' more' }), 100);
    await send(chunk({}, 'stop'), 0);
    await send(`data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'demo', choices: [],
      usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18, completion_tokens_details: { reasoning_tokens: 4 } } })}\n\n`, 0);
    open = false;
    res.end('data: [DONE]\n\n');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, closed: () => closedEarly,
    close: () => { server.closeAllConnections(); server.close(); } };
}

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('pages and assets are served, open without the API key, with ETags', async ({ base }) => {
  for (const p of ['/', '/dashboard', '/assets/chat.js', '/assets/dashboard.js', '/metrics.json']) {
    const res = await fetch(base + p);
    assert.equal(res.status, 200, p);
  }
  const res = await fetch(base + '/assets/chat.js');
  assert.match(res.headers.get('content-type'), /^text\/javascript/);
  const again = await fetch(base + '/assets/chat.js', { headers: { 'If-None-Match': res.headers.get('etag') } });
  assert.equal(again.status, 304);
  assert.equal((await fetch(base + '/assets/nope.js')).status, 404);
  assert.equal((await fetch(base + '/server_info')).status, 401, '/server_info needs the key');
  const m = await (await fetch(base + '/metrics.json')).json();
  const text = await (await fetch(base + '/metrics')).text();
  assert.equal(m.metrics['vllm:generation_tokens_total'], metric(text, 'vllm:generation_tokens_total'), 'JSON and text agree');
  assert.equal(m.metrics['vllm:time_to_first_token_seconds'].buckets.length, m.metrics['vllm:time_to_first_token_seconds'].le.length);
});

test('chat: two turns stream, survive a reload, edit and regenerate', async ({ base }) => {
  await withPage(base, async (page) => {
    const bodies = [];
    page.on('request', (r) => { if (r.url().endsWith('/v1/chat/completions')) bodies.push(r.postDataJSON()); });
    await page.goto(base + '/');
    await modelShown(page);
    await page.fill('#input', 'Hello from the browser');
    await page.press('#input', 'Enter');
    await idle(page);
    await page.fill('#input', 'Second turn');
    await page.press('#input', 'Shift+Enter');
    await page.type('#input', 'with two lines');
    await page.press('#input', 'Enter');
    await idle(page);
    assert.equal(await page.locator('#log .msg').count(), 4);
    assert.equal(await page.locator('.msg.user .bubble').nth(1).textContent(), 'Second turn\nwith two lines');
    assert.equal(await page.locator('.msg .err').filter({ hasText: /./ }).count(), 0, 'no error shown');
    assert.equal(bodies.length, 2);
    assert.deepEqual(bodies[1].messages.map((m) => m.role), ['user', 'assistant', 'user'], 'the first turn is sent back');
    assert.equal(bodies[1].stream_options.include_usage, true);
    const stats = await page.locator('.msg.assistant').last().locator('.stats').textContent();
    assert.match(stats, /TTFT \d[\d,.\u00a0\u202f ]* ms/);  // "2,114 ms" (grouped by the locale) under a sanitizer build
    assert.match(stats, /\d+ prompt/);
    assert.match(stats, /\d+ completion tokens/);
    await shot(page, 'chat-conversation.png');

    await page.reload();
    await modelShown(page);
    assert.equal(await page.locator('#log .msg').count(), 4, 'the conversation survives a reload');
    assert.equal(await page.locator('#convs .conv').count(), 1);
    assert.equal(await page.locator('#conv-title').textContent(), 'Hello from the browser');

    await page.locator('.msg.user .edit-btn').nth(1).click();
    await page.fill('.msg.user textarea', 'Edited question');
    await page.click('text=Save and regenerate');
    await idle(page);
    assert.equal(await page.locator('#log .msg').count(), 4);
    assert.equal(await page.locator('.msg.user .bubble').nth(1).textContent(), 'Edited question');
    await page.click('.msg.assistant .regen');
    await idle(page);
    assert.equal(await page.locator('#log .msg').count(), 4, 'regenerate replaces the last answer');
    assert.equal(bodies.length, 4);
    assert.equal(bodies[3].messages.at(-1).content, 'Edited question');
  }, { storage: { mxserve_settings: settings() } });
});

test('chat: a stored Markdown answer renders code, a table and math, nothing unsafe', async ({ base }) => {
  for (const theme of ['light', 'dark']) {
    await withPage(base, async (page) => {
      await page.goto(base + '/');
      await page.waitForSelector('.answer pre code');
      assert.equal(await page.locator('.answer pre code.hljs').count(), 1, 'highlighted');
      assert.match(await page.locator('.answer pre code').textContent(), /def add\(a, b\):/);
      assert.equal(await page.locator('.answer pre .copy').count(), 1, 'a copy button');
      assert.equal(await page.locator('.answer table td').count(), 4);
      assert.equal(await page.locator('.answer .katex').count(), 1, 'math typeset');
      assert.equal(await page.locator('.answer img').count(), 0, 'no images from outside');
      assert.equal(await page.evaluate(() => window.pwned), undefined, 'no script from the answer ran');
      assert.equal(await page.locator('.reasoning').isVisible(), true);
      assert.equal(await page.locator('#lib-note').isHidden(), true, 'every library is bundled');
      assert.match(await page.locator('.stats').textContent(), /99\.5 tok\/s/);
      assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), theme);
      await shot(page, `chat-markdown-${theme}.png`);
    }, { storage: { mxserve_chats: storedConversation, mxserve_theme: theme } });
  }
  await withPage(base, async (page) => {  // a phone
    await page.goto(base + '/');
    await page.waitForSelector('.answer pre code');
    assert.equal(await page.locator('#sidebar').isVisible(), true);
    assert.ok((await page.locator('#sidebar').boundingBox()).x < 0, 'the sidebar is tucked away');
    await page.click('#menu');
    await page.waitForFunction(() => document.getElementById('sidebar').getBoundingClientRect().x >= 0);
    await shot(page, 'chat-phone-sidebar.png');
    await page.click('#scrim', { position: { x: 350, y: 400 } });
    await page.waitForFunction(() => document.getElementById('sidebar').getBoundingClientRect().right <= 0);
    await shot(page, 'chat-phone.png');
  }, { storage: { mxserve_chats: storedConversation }, viewport: { width: 390, height: 844 } });
});

test('chat: reasoning streams live into a collapsible block, then the answer; stop mid-answer', async ({ base }) => {
  const sse = await pacedStream();
  try {
    await withPage(base, async (page) => {
      let mode = 'full';
      await page.route('**/v1/chat/completions', (route) => route.continue({ url: `${sse.url}/${mode}` }));
      await page.goto(base + '/');
      await modelShown(page);
      await page.fill('#input', 'How do I list files?');
      await page.click('#send');
      // While the model thinks: the block is open and its text grows.
      await page.waitForFunction(() => {
        const r = document.querySelector('.msg.assistant .reasoning');
        return r && r.open && r.querySelector('.text').textContent.split(' ').length > 3 && !r.hidden;
      }, null, { timeout: 10_000 });
      assert.equal(await page.locator('.msg.assistant .answer').textContent(), '');
      assert.match(await page.locator('.reasoning summary').textContent(), /Reasoning…/);
      await shot(page, 'chat-reasoning-live.png');
      await idle(page);
      assert.equal(await page.locator('.reasoning .text').textContent(), 'Thinking about which shell command lists files . ');
      assert.equal(await page.locator('.reasoning').getAttribute('open'), null, 'folded once the answer came');
      await page.click('.reasoning summary');
      assert.notEqual(await page.locator('.reasoning').getAttribute('open'), null, 'opens on a click');
      assert.equal(await page.locator('.answer pre code').textContent(), 'ls -la\n');
      assert.equal(await page.locator('.answer pre code.hljs').count(), 1);
      const stats = await page.locator('.stats').textContent();
      assert.match(stats, /TTFT \d[\d,.\u00a0\u202f ]* ms/);  // "2,114 ms" (grouped by the locale) under a sanitizer build
      assert.match(stats, /11 prompt/);
      assert.match(stats, /7 completion tokens \(4 reasoning\)/);

      mode = 'endless';  // an answer that never ends: Stop (here Escape) aborts it
      await page.fill('#input', 'And forever?');
      await page.press('#input', 'Enter');
      await page.waitForFunction(() => /more more/.test(document.querySelectorAll('.msg.assistant .answer')[1]?.textContent || ''),
        null, { timeout: 10_000 });
      await page.keyboard.press('Escape');
      await idle(page, 5_000);
      const last = page.locator('.msg.assistant').nth(1);
      assert.match(await last.locator('.stats').textContent(), /stopped/);
      assert.match(await last.locator('.answer').textContent(), /ls -la/, 'the partial answer is kept');
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(sse.closed(), true, 'the stream was closed by the page');
    });
  } finally {
    sse.close();
  }
});

test('chat: settings change the request body', async ({ base }) => {
  await withPage(base, async (page) => {
    let body = null;
    page.on('request', (r) => { if (r.url().endsWith('/v1/chat/completions')) body = r.postDataJSON(); });
    await page.goto(base + '/');
    await modelShown(page);
    await page.click('#open-settings');
    await page.$eval('#temperature', (e) => { e.value = '0.3'; e.dispatchEvent(new Event('input')); });
    await page.$eval('#top_p', (e) => { e.value = '0.8'; e.dispatchEvent(new Event('input')); });
    await page.fill('#max_tokens', '5');
    await page.selectOption('#reasoning_effort', 'high');
    await page.fill('#instructions', 'Be brief.');
    await shot(page, 'chat-settings.png');
    await page.click('#close-settings');
    await page.fill('#input', 'Hi');
    await page.press('#input', 'Enter');
    await idle(page);
    assert.equal(body.temperature, 0.3);
    assert.equal(body.top_p, 0.8);
    assert.equal(body.max_tokens, 5);
    assert.equal(body.reasoning_effort, 'high');
    assert.deepEqual(body.messages[0], { role: 'system', content: 'Be brief.' });
    assert.ok(Number((await page.locator('[data-stat=completion]').textContent()).match(/\d+/)[0]) <= 5);
    await page.reload();
    await page.click('#open-settings');
    assert.equal(await page.inputValue('#max_tokens'), '5', 'settings are kept');
  });
});

test('chat: stop ends a running request and the server cancels it', async ({ base }) => {
  await withPage(base, async (page) => {
    // A long answer: the request goes to the server with ignore_eos and many tokens. (The demo
    // model's output is not harmony, so its text arrives only at the end: stop comes before.)
    await page.route('**/v1/chat/completions', (route) => {
      const b = route.request().postDataJSON();
      route.continue({ postData: JSON.stringify({ ...b, max_tokens: 3000, ignore_eos: true }) });
    });
    const metrics = async () => (await (await fetch(base + '/metrics.json')).json()).metrics;
    const before = await metrics();
    await page.goto(base + '/');
    await modelShown(page);
    await page.fill('#input', 'Tell me a long story');
    await page.press('#input', 'Enter');
    for (let i = 0; i < 100 && (await metrics())['vllm:num_requests_running'] < 1; ++i) await new Promise((r) => setTimeout(r, 100));
    assert.equal((await metrics())['vllm:num_requests_running'], 1, 'the request runs');
    assert.equal(await page.locator('#stop').isVisible(), true);
    assert.equal(await page.locator('#send').isVisible(), false);
    await page.click('#stop');
    await idle(page, 5_000);
    assert.match(await page.locator('.stats').textContent(), /stopped/);
    assert.equal(await page.locator('#send').isVisible(), true);
    let after = null;
    for (let i = 0; i < 50; ++i) {
      after = await metrics();
      if (after['vllm:num_requests_running'] === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(after['vllm:num_requests_running'], 0, 'the server cancelled the request');
    assert.ok(after['vllm:request_success_total'].abort > before['vllm:request_success_total'].abort);
    await page.reload();
    assert.match(await page.locator('.stats').textContent(), /stopped/, 'the stopped answer is kept');
  }, { storage: { mxserve_settings: settings({ max_tokens: 3000 }) } });
});

test('chat: export, then import, from the sidebar', async ({ base }) => {
  await withPage(base, async (page) => {
    await page.goto(base + '/');
    await page.waitForSelector('.answer pre code');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
    const file = await download.path();
    const exported = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.equal(exported.conversations.length, 1);
    assert.equal(exported.conversations[0].messages[1].content, markdownAnswer);
    await page.setInputFiles('#import', file);
    await page.waitForFunction(() => document.querySelectorAll('#convs .conv').length === 2);
    await page.locator('#convs .conv').nth(1).hover();
    await page.locator('#convs .conv').nth(1).locator('button[title=Rename]').click();
    await page.fill('#convs input', 'Renamed copy');
    await page.press('#convs input', 'Enter');
    assert.equal(await page.locator('#convs .conv .name').filter({ hasText: 'Renamed copy' }).count(), 1);
    page.once('dialog', (d) => d.accept());
    await page.locator('#convs .conv').first().hover();
    await page.locator('#convs .conv').first().locator('button[title=Delete]').click();
    await page.waitForFunction(() => document.querySelectorAll('#convs .conv').length === 1);
  }, { storage: { mxserve_chats: storedConversation } });
});

test('chat and dashboard without the bundled libraries: plain text, simple plots, a note', async ({ base }) => {
  await withPage(base, async (page) => {
    await page.route('**/assets/lib/**', (route) => route.fulfill({ status: 404, body: 'not bundled' }));
    await page.goto(base + '/');
    await page.waitForSelector('.answer.plain');
    assert.equal(await page.locator('#lib-note').isVisible(), true);
    assert.match(await page.locator('#lib-note').textContent(), /plain text/);
    assert.match(await page.locator('.answer.plain').textContent(), /```python/);
    assert.equal(await page.locator('.answer img').count(), 0);
    await shot(page, 'chat-fallback.png');
    await page.goto(base + '/dashboard');
    await page.waitForFunction(() => Number(document.getElementById('plot-requests').dataset.points) >= 2, null, { timeout: 20_000 });
    assert.equal(await page.locator('#lib-note').isVisible(), true);
    assert.equal(await page.locator('#plot-requests canvas').count(), 1);
    await shot(page, 'dashboard-fallback.png');
  }, { storage: { mxserve_chats: storedConversation }, allow404: true });
});

test('dashboard: plots receive data while requests run; the side panel shows the server', async ({ base }) => {
  await withPage(base, async (page) => {
    await page.goto(base + '/dashboard');
    await page.waitForFunction(() => Number(document.getElementById('plot-throughput').dataset.points) >= 2, null, { timeout: 20_000 });
    // Requests that outlast a few of the page's one-second polls: the demo model on the CPU takes
    // seconds for 40 tokens, a GPU (MXSERVE_TEST_MODEL) a fraction of one for them.
    const scale = process.env.MXSERVE_TEST_MODEL ? 40 : 1;
    const load = Array.from({ length: 4 }, (_, i) => fetch(base + '/v1/chat/completions', { method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: `load ${i}` }], max_tokens: (40 + 20 * i) * scale,
        ignore_eos: true }) }).then((r) => r.json()));
    await page.waitForFunction(() => {
      const p = window.MXDash.plots;
      return p.requests.data[1].some((v) => v > 0) && p.throughput.data[1].some((v) => v > 0) && p.kv.data[1].some((v) => v > 0);
    }, null, { timeout: 60_000 });
    await Promise.all(load);
    await page.waitForFunction(() => window.MXDash.plots.ttft.data[1].some((v) => v > 0) &&
      window.MXDash.plots.tpot.data[1].some((v) => v > 0), null, { timeout: 20_000 });
    assert.equal(await page.locator('#plot-throughput .uplot').count(), 1, 'uPlot draws the plots');
    assert.equal(await page.locator('#lib-note').isHidden(), true);
    const info = await page.locator('#info').textContent();
    assert.match(info, process.env.MXSERVE_TEST_MODEL ? /bf16_mxfp4w_moe/ : /CPU reference/, 'the dispatch paths');
    assert.match(info, /max_num_seqs/, 'the start-up settings');
    assert.doesNotMatch(info, new RegExp(API_KEY), 'never the key');
    await shot(page, 'dashboard.png', true);
    await page.click('#theme');
    await page.waitForTimeout(300);
    await shot(page, 'dashboard-dark.png', true);
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(300);
    await shot(page, 'dashboard-phone.png');
  });
});

await runSuite({ binary, tests, timeoutMs: 400_000,
  args: ['--api-key', API_KEY, '--served-model-name', 'demo', '-c', '4096', '-np', '8', '--num-gpu-blocks-override', '1024'],
  context: (server) => { console.log(`     screenshots: ${shots}`); return { base: server.base }; } });
