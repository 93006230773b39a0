// Shared by the chat page and the dashboard (window.MX): fetch with the API key, the light/dark
// theme, and a small element builder.
'use strict';
window.MX = window.MX || {};

// With --api-key the /v1 routes need the key: asked once, kept in localStorage.
MX.api = async function api(path, init = {}) {
  for (let attempt = 0; attempt < 2; ++attempt) {
    const key = localStorage.getItem('mxserve_key');
    const headers = Object.assign({ 'Content-Type': 'application/json' }, key ? { Authorization: 'Bearer ' + key } : {});
    const res = await fetch(path, Object.assign({}, init, { headers }));
    if (res.status !== 401 || attempt) return res;
    const k = window.prompt('This server needs an API key');
    if (!k) return res;
    localStorage.setItem('mxserve_key', k);
  }
};

// The error message of a failed response (the OpenAI error body, or the status line).
MX.errorOf = async function errorOf(res) {
  try {
    const j = await res.json();
    if (j.error && j.error.message) return j.error.message;
  } catch (e) { /* not JSON */ }
  return `HTTP ${res.status} ${res.statusText}`;
};

MX.el = function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
};

// Theme: the stored choice, else the system's; the highlighter's two style sheets follow it.
MX.theme = {
  current() { return document.documentElement.dataset.theme; },
  apply(t) {
    document.documentElement.dataset.theme = t;
    for (const link of document.querySelectorAll('link[data-theme-sheet]')) link.disabled = link.dataset.themeSheet !== t;
    document.dispatchEvent(new CustomEvent('mx-theme', { detail: t }));
  },
  toggle() {
    const t = MX.theme.current() === 'dark' ? 'light' : 'dark';
    localStorage.setItem('mxserve_theme', t);
    MX.theme.apply(t);
  },
  init() {
    const stored = localStorage.getItem('mxserve_theme');
    const media = window.matchMedia('(prefers-color-scheme: dark)');
    MX.theme.apply(stored || (media.matches ? 'dark' : 'light'));
    media.addEventListener('change', (e) => { if (!localStorage.getItem('mxserve_theme')) MX.theme.apply(e.matches ? 'dark' : 'light'); });
  },
};
MX.theme.init();
