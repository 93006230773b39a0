// The chat page's controller: the sidebar of stored conversations, the message log with live
// reasoning, answers and per-answer speed, send / stop / edit / regenerate, the settings panel,
// export and import. Storage is chat_store.js, rendering chat_render.js, the stream chat_stream.js.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const { el, store } = MX;
  const app = $('app'), log = $('log'), input = $('input');
  let model = null;
  let running = null;  // { controller, conv } while an answer streams

  // ---- notes and small helpers ----
  function toast(text) {
    const t = el('div', { class: 'note', role: 'status', text, style: 'position:fixed;right:16px;bottom:90px;z-index:40' });
    document.body.append(t);
    setTimeout(() => t.remove(), 3500);
  }
  window.addEventListener('mx-store-error', (e) => toast('Could not save the conversations: ' + e.detail));
  const missing = MX.render.missing();
  if (missing.length) {
    const note = $('lib-note');
    note.hidden = false;
    note.textContent = 'Built without its web libraries (run scripts/install-deps.sh --npm, then rebuild mxserve): no ' +
      missing.join(', no ') + '.';
  }
  const nearBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  const scrollDown = () => { log.scrollTop = log.scrollHeight; };
  const fmt = (x, digits = 0) => Number(x).toLocaleString(undefined, { maximumFractionDigits: digits, minimumFractionDigits: digits });

  // ---- the model ----
  async function loadModel() {
    try {
      const res = await MX.api('/v1/models');
      if (res.ok) {
        model = (await res.json()).data[0].id;
        $('model').textContent = model;
        return;
      }
      $('model').textContent = res.status === 503 ? 'loading…' : 'no model';
    } catch (e) { $('model').textContent = 'offline'; }
    setTimeout(loadModel, 2000);
  }

  // ---- sidebar ----
  function renderSidebar() {
    const nav = $('convs');
    nav.replaceChildren();
    const cur = store.current();
    for (const c of store.list()) {
      const row = el('div', { class: 'conv' + (cur && cur.id === c.id ? ' active' : ''), 'data-id': c.id, title: c.title });
      const name = el('span', { class: 'name', text: c.title });
      const rename = el('button', { class: 'icon', title: 'Rename', 'aria-label': 'Rename', text: '\u270E' });
      const del = el('button', { class: 'icon danger', title: 'Delete', 'aria-label': 'Delete', text: '\u2715' });
      row.append(name, rename, del);
      row.addEventListener('click', () => switchTo(c.id));
      rename.addEventListener('click', (ev) => { ev.stopPropagation(); startRename(row, c); });
      del.addEventListener('click', (ev) => {
        ev.stopPropagation();
        if (!window.confirm(`Delete "${c.title}"?`)) return;
        if (running && running.conv === c) stop();
        store.remove(c.id);
        renderAll();
      });
      nav.append(row);
    }
    $('conv-title').textContent = cur ? cur.title : 'New conversation';
  }

  function startRename(row, c) {
    const box = el('input', { type: 'text', 'aria-label': 'Conversation name' });
    box.value = c.title;
    row.querySelector('.name').replaceWith(box);
    box.focus();
    box.select();
    let done = false;
    const finish = (save) => {
      if (done) return;
      done = true;
      if (save) store.rename(c.id, box.value);
      renderSidebar();
    };
    box.addEventListener('click', (ev) => ev.stopPropagation());
    box.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter') finish(true);
      if (ev.key === 'Escape') finish(false);
    });
    box.addEventListener('blur', () => finish(true));
  }

  function switchTo(id) {
    if (running) stop();
    store.select(id);
    app.classList.remove('side-open');
    renderAll();
  }

  // ---- the log ----
  function statsLine(s) {
    const parts = [];
    if (s.ttft_ms !== undefined) parts.push(['ttft', `TTFT ${fmt(s.ttft_ms)} ms`]);
    if (s.tokens_per_s !== undefined) parts.push(['speed', `${fmt(s.tokens_per_s, 1)} tok/s`]);
    if (s.prompt_tokens !== undefined) parts.push(['prompt', `${fmt(s.prompt_tokens)} prompt`]);
    if (s.completion_tokens !== undefined) {
      const r = s.reasoning_tokens ? ` (${fmt(s.reasoning_tokens)} reasoning)` : '';
      parts.push(['completion', `${fmt(s.completion_tokens)} completion tokens${r}`]);
    }
    if (s.seconds !== undefined) parts.push(['time', `${fmt(s.seconds, 1)} s`]);
    if (s.finish_reason) parts.push(['finish', s.finish_reason === 'length' ? 'cut at max tokens' : s.finish_reason]);
    if (s.stopped) parts.push(['stopped', 'stopped']);
    return parts.map(([k, t]) => el('span', { 'data-stat': k, text: t }));
  }

  // The DOM of an assistant message and an update(msg, streaming) that refreshes it in place.
  function assistantView(msg, index, isLast) {
    const reasoningText = el('div', { class: 'text' });
    const summary = el('summary', { text: 'Reasoning' });
    const reasoning = el('details', { class: 'reasoning' }, summary, reasoningText);
    const tools = el('div', { class: 'tools' });
    const answer = el('div', { class: 'answer' });
    const err = el('div', { class: 'err' });
    const stats = el('div', { class: 'stats' });
    const bubble = el('div', { class: 'bubble' }, reasoning, tools, answer, err);
    const actions = el('div', { class: 'actions' });
    const node = el('div', { class: 'msg assistant', 'data-index': index }, bubble, stats, actions);
    let shownContent = null, frame = 0;
    function update(m, streaming) {
      reasoning.hidden = !m.reasoning;
      reasoningText.textContent = m.reasoning || '';
      const rt = m.stats && m.stats.reasoning_tokens;
      summary.textContent = streaming && !m.content ? 'Reasoning…' : rt ? `Reasoning (${fmt(rt)} tokens)` : 'Reasoning';
      if (streaming && m.reasoning && !m.content && !reasoning.dataset.touched) reasoning.open = true;
      if (m.content && !reasoning.dataset.touched) reasoning.open = false;
      tools.replaceChildren(...(m.tool_calls || []).map((t) => el('div', { class: 'tool-call' },
        el('b', { text: `Tool call: ${t.function.name || '?'}` }), '\n', t.function.arguments || '')));
      if (m.content !== shownContent && !frame) {
        frame = requestAnimationFrame(() => {
          frame = 0;
          shownContent = m.content;
          MX.render(answer, m.content || '', { streaming });
          answer.classList.toggle('cursor', streaming);
        });
      }
      if (!streaming && frame) { cancelAnimationFrame(frame); frame = 0; }
      if (!streaming && shownContent !== m.content) { shownContent = m.content; MX.render(answer, m.content || ''); }
      answer.classList.toggle('cursor', streaming);
      err.hidden = !m.error;
      err.textContent = m.error ? 'Error: ' + m.error : '';
      stats.replaceChildren(...statsLine(m.stats || {}));
      actions.replaceChildren();
      if (!streaming) {
        actions.append(el('button', { type: 'button', text: 'Copy', onclick: () => MX.copyText(m.content || '') }));
        if (isLast) actions.append(el('button', { type: 'button', class: 'regen', text: 'Regenerate', onclick: () => regenerate(index) }));
      }
    }
    summary.addEventListener('click', () => { reasoning.dataset.touched = '1'; });  // the user decides from now on
    return { node, update };
  }

  function userView(msg, index) {
    const bubble = el('div', { class: 'bubble', text: msg.content });
    const edit = el('button', { type: 'button', class: 'edit-btn', text: 'Edit', onclick: () => startEdit(node, index) });
    const node = el('div', { class: 'msg user', 'data-index': index }, bubble, el('div', { class: 'actions' }, edit));
    return node;
  }

  function renderLog() {
    const conv = store.current();
    log.replaceChildren();
    if (!conv || !conv.messages.length) {
      log.append(el('div', { class: 'empty' }, el('h2', { text: 'mxserve' }),
        el('p', { text: model ? `Chatting with ${model}. Conversations stay in this browser.` : 'Conversations stay in this browser.' })));
      return;
    }
    const lastAssistant = conv.messages.map((m) => m.role).lastIndexOf('assistant');
    conv.messages.forEach((m, i) => {
      if (m.role === 'user') return log.append(userView(m, i));
      const v = assistantView(m, i, i === lastAssistant && !running);
      v.update(m, false);
      log.append(v.node);
    });
    scrollDown();
  }

  function renderAll() { renderSidebar(); renderLog(); }

  // ---- sending, streaming, stopping ----
  function setRunning(r) {
    running = r;
    app.dataset.state = r ? 'streaming' : 'idle';
    $('send').hidden = !!r;
    $('stop').hidden = !r;
  }

  async function generate(conv) {
    const settings = store.settings.get();
    const body = MX.chatBody(model, settings, conv.messages);
    const controller = new AbortController();
    setRunning({ controller, conv });
    store.touch(conv);
    renderAll();
    const msg = { role: 'assistant', content: '', stats: {} };
    conv.messages.push(msg);
    const view = assistantView(msg, conv.messages.length - 1, true);
    view.update(msg, true);
    log.append(view.node);
    scrollDown();
    const t0 = performance.now();
    let tFirst = 0, tLast = 0;
    const live = () => {
      tLast = performance.now();
      if (!tFirst) { tFirst = tLast; msg.stats.ttft_ms = Math.round(tFirst - t0); }
      const follow = nearBottom();
      view.update(msg, true);
      if (follow) scrollDown();
    };
    try {
      await MX.streamChat(body, controller.signal, {
        onReasoning: (t) => { msg.reasoning = (msg.reasoning || '') + t; live(); },
        onContent: (t) => { msg.content += t; live(); },
        onToolCalls: (list) => { msg.tool_calls = JSON.parse(JSON.stringify(list)); live(); },
        onFinish: (reason) => { msg.stats.finish_reason = reason; },
        onUsage: (u) => {
          msg.stats.prompt_tokens = u.prompt_tokens;
          msg.stats.completion_tokens = u.completion_tokens;
          const r = u.completion_tokens_details && u.completion_tokens_details.reasoning_tokens;
          if (r) msg.stats.reasoning_tokens = r;
        },
      });
    } catch (e) {
      if (e.name === 'AbortError') msg.stats.stopped = true;
      else msg.error = e.message || String(e);
    }
    const end = performance.now();
    msg.stats.seconds = Math.round((end - t0) / 100) / 10;
    // Decode speed: the tokens after the first over the time they took to stream; when they came
    // in one piece (a server that holds the text back), every token over the whole request.
    const n = msg.stats.completion_tokens;
    const tps = tLast - tFirst >= 50 ? (n - 1) / ((tLast - tFirst) / 1000) : n / ((end - t0) / 1000);
    if (n > 1 && Number.isFinite(tps)) msg.stats.tokens_per_s = Math.round(tps * 10) / 10;
    setRunning(null);
    store.touch(conv);
    if (store.current() === conv) renderAll();
  }

  function stop() {
    if (running) running.controller.abort();
  }

  async function send() {
    const text = input.value;
    if (!text.trim() || running) return;
    if (!model) { toast('The model is not loaded yet.'); return; }
    input.value = '';
    autosize();
    const conv = store.ensureCurrent(text);
    conv.messages.push({ role: 'user', content: text });
    await generate(conv);
  }

  function regenerate(index) {
    const conv = store.current();
    if (!conv || running) return;
    conv.messages = conv.messages.slice(0, index);
    generate(conv);
  }

  function startEdit(node, index) {
    const conv = store.current();
    if (!conv || running) return;
    const box = el('textarea', { 'aria-label': 'Edit the message' });
    box.value = conv.messages[index].content;
    const save = el('button', { type: 'button', class: 'primary', text: 'Save and regenerate' });
    const cancel = el('button', { type: 'button', text: 'Cancel', onclick: renderLog });
    save.addEventListener('click', () => {
      if (!box.value.trim()) return;
      conv.messages = conv.messages.slice(0, index);
      conv.messages.push({ role: 'user', content: box.value });
      generate(conv);
    });
    box.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); save.click(); }
      if (ev.key === 'Escape') renderLog();
    });
    node.replaceChildren(el('div', { class: 'edit' }, box, el('div', { class: 'actions' }, cancel, save)));
    box.focus();
  }

  function autosize() {
    input.style.height = 'auto';
    input.style.height = Math.min(input.scrollHeight + 2, window.innerHeight * 0.4) + 'px';
  }

  // ---- settings ----
  function bindSettings() {
    const s = store.settings.get();
    const fields = ['temperature', 'top_p', 'max_tokens', 'reasoning_effort', 'instructions'];
    const show = () => {
      $('temperature-val').textContent = Number($('temperature').value).toFixed(2);
      $('top_p-val').textContent = Number($('top_p').value).toFixed(2);
    };
    for (const f of fields) {
      $(f).value = s[f];
      $(f).addEventListener('input', () => {
        const cur = store.settings.get();
        cur[f] = $(f).type === 'range' || $(f).type === 'number' ? Number($(f).value) : $(f).value;
        store.settings.set(cur);
        show();
      });
    }
    show();
  }
  $('open-settings').addEventListener('click', () => { $('settings').hidden = !$('settings').hidden; });
  $('close-settings').addEventListener('click', () => { $('settings').hidden = true; });
  $('reset-settings').addEventListener('click', () => { store.settings.reset(); bindSettings(); });

  // ---- export, import ----
  $('export').addEventListener('click', () => {
    const url = URL.createObjectURL(new Blob([store.exportJson()], { type: 'application/json' }));
    const a = el('a', { href: url, download: `mxserve-chats-${new Date().toISOString().slice(0, 10)}.json` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  });
  $('import').addEventListener('change', async (ev) => {
    const file = ev.target.files[0];
    ev.target.value = '';
    if (!file) return;
    try {
      const n = store.importJson(await file.text());
      toast(`Imported ${n} conversation${n === 1 ? '' : 's'}.`);
      renderSidebar();
    } catch (e) { toast('Import failed: ' + e.message); }
  });

  // ---- wiring ----
  $('composer').addEventListener('submit', (ev) => { ev.preventDefault(); send(); });
  $('stop').addEventListener('click', stop);
  $('new-chat').addEventListener('click', () => {
    if (running) stop();
    store.create();
    app.classList.remove('side-open');
    renderAll();
    input.focus();
  });
  $('theme').addEventListener('click', MX.theme.toggle);
  $('menu').addEventListener('click', () => app.classList.toggle('side-open'));
  $('scrim').addEventListener('click', () => app.classList.remove('side-open'));
  input.addEventListener('input', autosize);
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); send(); }
  });
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && running) stop();
  });

  setRunning(null);
  bindSettings();
  renderAll();
  loadModel();
  input.focus();
})();
