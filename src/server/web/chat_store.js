// The conversations and the settings, kept in this browser's localStorage (MX.store): create,
// switch, rename, delete, export to and import from JSON. A conversation is
// { id, title, created, updated, messages: [{ role: 'user' | 'assistant', content, reasoning?,
//   tool_calls?, stats?, error? }] }.
'use strict';
(() => {
  const KEY = 'mxserve_chats';
  const SETTINGS_KEY = 'mxserve_settings';
  const DEFAULTS = { temperature: 1.0, top_p: 1.0, max_tokens: 2048, reasoning_effort: 'medium', instructions: '' };

  const newId = () => 'c' + Date.now().toString(36) + Math.random().toString(36).slice(2, 8);

  function readAll() {
    try {
      const s = JSON.parse(localStorage.getItem(KEY) || 'null');
      if (s && Array.isArray(s.conversations)) return s;
    } catch (e) { console.warn('mxserve: stored conversations unreadable, starting afresh', e); }
    return { version: 1, current: null, conversations: [] };
  }

  // A conversation read from a file or storage, checked field by field (nothing else is kept).
  function clean(c) {
    if (!c || typeof c !== 'object' || !Array.isArray(c.messages)) return null;
    const messages = c.messages.filter((m) => m && (m.role === 'user' || m.role === 'assistant') && typeof m.content === 'string')
      .map((m) => {
        const out = { role: m.role, content: m.content };
        if (typeof m.reasoning === 'string' && m.reasoning) out.reasoning = m.reasoning;
        if (Array.isArray(m.tool_calls) && m.tool_calls.length) out.tool_calls = m.tool_calls;
        if (m.stats && typeof m.stats === 'object') out.stats = m.stats;
        if (typeof m.error === 'string') out.error = m.error;
        return out;
      });
    const now = Date.now();
    return { id: typeof c.id === 'string' ? c.id : newId(), title: typeof c.title === 'string' ? c.title : 'Imported',
      created: Number(c.created) || now, updated: Number(c.updated) || now, messages };
  }

  const state = readAll();
  state.conversations = state.conversations.map(clean).filter(Boolean);

  const store = {
    list() { return [...state.conversations].sort((a, b) => b.updated - a.updated); },
    get(id) { return state.conversations.find((c) => c.id === id) || null; },
    current() { return store.get(state.current); },
    select(id) { state.current = id; store.save(); },
    // A conversation is stored once it has a message; until then `current` is null.
    create() { state.current = null; store.save(); },
    ensureCurrent(firstText) {
      let c = store.current();
      if (!c) {
        const now = Date.now();
        c = { id: newId(), title: firstText.replace(/\s+/g, ' ').trim().slice(0, 48) || 'New conversation',
          created: now, updated: now, messages: [] };
        state.conversations.push(c);
        state.current = c.id;
      }
      return c;
    },
    touch(c) { c.updated = Date.now(); store.save(); },
    rename(id, title) { const c = store.get(id); if (c && title.trim()) { c.title = title.trim(); store.save(); } },
    remove(id) {
      state.conversations = state.conversations.filter((c) => c.id !== id);
      if (state.current === id) state.current = null;
      store.save();
    },
    save() {
      try {
        localStorage.setItem(KEY, JSON.stringify(state));
      } catch (e) {  // quota: say so rather than lose the page
        console.error('mxserve: could not save the conversations', e);
        window.dispatchEvent(new CustomEvent('mx-store-error', { detail: String(e) }));
      }
    },
    exportJson() {
      return JSON.stringify({ format: 'mxserve-chats', version: 1, exported: new Date().toISOString(),
        conversations: state.conversations }, null, 2);
    },
    // Adds the conversations of an exported file (or a bare list); an id already here gets a new one.
    importJson(text) {
      const j = JSON.parse(text);
      const list = Array.isArray(j) ? j : j && Array.isArray(j.conversations) ? j.conversations : null;
      if (!list) throw new Error('not an mxserve conversations file');
      let added = 0;
      for (const raw of list) {
        const c = clean(raw);
        if (!c) continue;
        if (store.get(c.id)) c.id = newId();
        state.conversations.push(c);
        added++;
      }
      store.save();
      return added;
    },
  };

  store.settings = {
    defaults: DEFAULTS,
    get() {
      try { return Object.assign({}, DEFAULTS, JSON.parse(localStorage.getItem(SETTINGS_KEY) || '{}')); } catch (e) { return { ...DEFAULTS }; }
    },
    set(s) { localStorage.setItem(SETTINGS_KEY, JSON.stringify(s)); },
    reset() { localStorage.removeItem(SETTINGS_KEY); },
  };

  MX.store = store;
})();
