// The operator view: polls GET /metrics.json every 1-5 s and plots throughput, requests, KV-cache
// use, TTFT and TPOT percentiles (from the histograms' buckets over a 30 s window) and
// preemptions; the side panel shows GET /server_info (model, dispatch paths, start-up settings).
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const { el } = MX;
  const WINDOW_S = 30;  // the percentiles' window
  const C = { a: '#2f9e44', b: '#1c7ed6', c: '#e8590c', d: '#ae3ec9' };
  if (MX.Plot.simple) $('lib-note').hidden = false;
  $('theme').addEventListener('click', MX.theme.toggle);

  const plots = {
    throughput: new MX.Plot($('plot-throughput'), { title: 'Throughput', unit: 'tok/s',
      series: [{ label: 'generation', color: C.a }, { label: 'prompt', color: C.b }] }),
    requests: new MX.Plot($('plot-requests'), { title: 'Requests', digits: 0, minMax: 1,
      series: [{ label: 'running', color: C.a }, { label: 'waiting', color: C.c }] }),
    kv: new MX.Plot($('plot-kv'), { title: 'KV-cache use', unit: '%', minMax: 1,
      series: [{ label: 'used', color: C.d }] }),
    ttft: new MX.Plot($('plot-ttft'), { title: `Time to first token (last ${WINDOW_S} s)`, unit: 'ms', digits: 0, points: true,
      series: [{ label: 'p50', color: C.a }, { label: 'p90', color: C.b }, { label: 'p99', color: C.c }] }),
    tpot: new MX.Plot($('plot-tpot'), { title: `Time per output token (last ${WINDOW_S} s)`, unit: 'ms', points: true,
      series: [{ label: 'p50', color: C.a }, { label: 'p90', color: C.b }, { label: 'p99', color: C.c }] }),
    events: new MX.Plot($('plot-events'), { title: 'Finished requests and preemptions', unit: '/s', minMax: 0.1,
      series: [{ label: 'finished', color: C.b }, { label: 'aborted', color: C.c }, { label: 'preempted', color: C.d }] }),
  };
  window.MXDash = { plots };  // for the tests and the console

  // Prometheus' histogram_quantile over the difference of two snapshots of cumulative buckets.
  function quantile(q, now, then) {
    const d = now.buckets.map((c, i) => c - (then ? then.buckets[i] : 0));
    const total = d[d.length - 1];
    if (!(total > 0)) return null;
    const rank = q * total;
    for (let i = 0; i < d.length; ++i) {
      if (d[i] < rank) continue;
      if (now.le[i] === '+Inf') return i ? now.le[i - 1] : null;  // past the last bound: report the bound
      const lo = i ? now.le[i - 1] : 0, below = i ? d[i - 1] : 0, inBucket = d[i] - below;
      return lo + (now.le[i] - lo) * (inBucket > 0 ? (rank - below) / inBucket : 1);
    }
    return null;
  }

  const history = [];  // recent snapshots: { time, m }
  const success = (m, r) => (m['vllm:request_success_total'] || {})[r] || 0;

  function tile(k, v) { return el('div', { class: 'tile' }, el('div', { class: 'v', text: v }), el('div', { class: 'k', text: k })); }

  function update(snap) {
    const m = snap.metrics, t = snap.time;
    const prev = history[history.length - 1];
    history.push({ time: t, m });
    while (history.length > 2 && history[1].time <= t - WINDOW_S) history.shift();
    const base = history[0] !== history[history.length - 1] ? history[0] : null;
    const rate = (name, f = (x, n) => x[n]) => (prev && t > prev.time ? Math.max(0, (f(m, name) - f(prev.m, name)) / (t - prev.time)) : null);
    const gen = rate('vllm:generation_tokens_total'), prompt = rate('vllm:prompt_tokens_total');
    plots.throughput.push(t, [gen, prompt]);
    plots.requests.push(t, [m['vllm:num_requests_running'], m['vllm:num_requests_waiting']]);
    plots.kv.push(t, [100 * m['vllm:kv_cache_usage_perc']]);
    const pct = (name, scale) => [0.5, 0.9, 0.99].map((q) => {
      const v = base ? quantile(q, m[name], base.m[name]) : null;
      return v === null ? null : v * scale;
    });
    plots.ttft.push(t, pct('vllm:time_to_first_token_seconds', 1000));
    plots.tpot.push(t, pct('vllm:time_per_output_token_seconds', 1000));
    const finished = rate('', (x) => success(x, 'stop') + success(x, 'length'));
    plots.events.push(t, [finished, rate('abort', success), rate('vllm:num_preemptions_total')]);

    const queries = m['vllm:prefix_cache_queries_total'], hits = m['vllm:prefix_cache_hits_total'];
    const done = success(m, 'stop') + success(m, 'length');
    const n = (x, d = 0) => (x === null || x === undefined ? '–' : (+x).toLocaleString(undefined, { maximumFractionDigits: d }));
    $('tiles').replaceChildren(
      tile('running', n(m['vllm:num_requests_running'])), tile('waiting', n(m['vllm:num_requests_waiting'])),
      tile('KV cache used', n(100 * m['vllm:kv_cache_usage_perc'], 1) + ' %'), tile('generation tok/s', n(gen, 1)),
      tile('requests finished', n(done)), tile('aborted', n(success(m, 'abort'))),
      tile('tokens generated', n(m['vllm:generation_tokens_total'])), tile('preemptions', n(m['vllm:num_preemptions_total'])),
      tile('prefix-cache hits', queries ? n((100 * hits) / queries, 1) + ' %' : '–'));
  }

  let interval = 1000, failures = 0;
  $('interval').addEventListener('change', (e) => { interval = Number(e.target.value); });
  async function poll() {
    try {
      const res = await fetch('/metrics.json', { cache: 'no-store' });
      if (!res.ok) throw new Error(res.status === 503 ? 'the model is loading' : await MX.errorOf(res));
      const snap = await res.json();
      $('model').textContent = snap.model_name;
      update(snap);
      failures = 0;
      $('status').textContent = 'updated ' + new Date(snap.time * 1000).toLocaleTimeString();
      if (!infoLoaded) loadInfo();
    } catch (e) {
      failures++;
      $('status').textContent = 'no data: ' + e.message;
    }
    setTimeout(poll, failures > 3 ? Math.max(interval, 5000) : interval);
  }

  // ---- the side panel ----
  let infoLoaded = false;
  const table = (obj) => el('table', {}, ...Object.entries(obj).map(([k, v]) =>
    el('tr', {}, el('td', { text: k }), el('td', { text: typeof v === 'object' ? JSON.stringify(v) : String(v) }))));
  async function loadInfo() {
    infoLoaded = true;
    const body = $('info-body');
    let res;
    try { res = await MX.api('/server_info'); } catch (e) { infoLoaded = false; return; }
    if (!res.ok) {
      infoLoaded = res.status === 401;  // a key is needed and none was given: do not ask again each poll
      body.textContent = res.status === 401 ? 'GET /server_info needs the API key (reload to enter it).' : 'unavailable: ' + (await MX.errorOf(res));
      return;
    }
    const info = await res.json();
    const up = Math.max(0, Date.now() / 1000 - info.created);
    const gib = (b) => (b / 2 ** 30).toFixed(2) + ' GiB';
    body.classList.remove('muted');
    body.replaceChildren(
      table({ model: info.model, path: info.root, backend: info.backend, weights: gib(info.weight_bytes),
        max_model_len: info.max_model_len, uptime: `${Math.floor(up / 3600)} h ${Math.floor(up / 60) % 60} min` }),
      el('h4', { text: 'Dispatch paths' }), el('ul', {}, ...info.dispatch.map((d) => el('li', { text: d }))),
      el('h4', { text: 'KV cache' }), el('div', { class: 'muted', text: info.kv_layout }),
      el('h4', { text: 'Start-up settings' }), table(info.settings),
      el('h4', { text: 'Model config' }), table(info.config));
  }

  poll();
})();
