// GET /: a self-contained chat page (no external assets): streams /v1/chat/completions, shows the
// reasoning in a collapsed <details>, lets the user pick the reasoning effort.
#include "server/handlers.h"

namespace mx::server {
namespace {

constexpr const char* kPage = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>mxserve chat</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;background:#f6f6f4;color:#222}
header{padding:10px 16px;background:#20232a;color:#eee;display:flex;gap:12px;align-items:center}
header b{flex:1}
#log{max-width:820px;margin:0 auto;padding:16px 16px 120px}
.msg{margin:10px 0;padding:10px 14px;border-radius:10px;white-space:pre-wrap;line-height:1.4}
.user{background:#dbe8ff;margin-left:15%}
.assistant{background:#fff;border:1px solid #ddd;margin-right:15%}
details{color:#666;font-size:.9em;margin-bottom:6px}
form{position:fixed;bottom:0;left:0;right:0;background:#fff;border-top:1px solid #ccc;padding:10px;display:flex;gap:8px;justify-content:center}
textarea{width:min(640px,70vw);height:48px;font:inherit}
.err{color:#b00}
</style></head><body>
<header><b>mxserve</b><span id="model"></span>
<label>Reasoning <select id="effort"><option>low</option><option selected>medium</option><option>high</option></select></label>
<label>Max tokens <input id="maxtok" type="number" value="256" min="1" style="width:5em"></label></header>
<div id="log"></div>
<form id="f"><textarea id="input" placeholder="Say something…"></textarea><button id="send" type="submit">Send</button></form>
<script>
const log = document.getElementById('log'), input = document.getElementById('input');
const history = [];
let model = null;
// With --api-key the /v1 routes need the key: asked once, kept in localStorage.
async function api(path, init = {}) {
  for (let attempt = 0; attempt < 2; ++attempt) {
    const key = localStorage.getItem('mxserve_key');
    const headers = Object.assign({'Content-Type': 'application/json'}, key ? {Authorization: 'Bearer ' + key} : {});
    const res = await fetch(path, Object.assign({}, init, {headers}));
    if (res.status !== 401 || attempt) return res;
    const k = prompt('API key'); if (!k) return res;
    localStorage.setItem('mxserve_key', k);
  }
}
api('/v1/models').then(r => r.json()).then(j => { model = j.data[0].id; document.getElementById('model').textContent = model; });
function bubble(cls) { const d = document.createElement('div'); d.className = 'msg ' + cls; log.appendChild(d); return d; }
document.getElementById('f').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const text = input.value.trim(); if (!text) return;
  input.value = '';
  history.push({role: 'user', content: text});
  bubble('user').textContent = text;
  const box = bubble('assistant');
  const det = document.createElement('details'); const sum = document.createElement('summary');
  sum.textContent = 'Reasoning'; const reasoning = document.createElement('div');
  det.appendChild(sum); det.appendChild(reasoning); det.style.display = 'none';
  const answer = document.createElement('div'); answer.className = 'answer';
  box.appendChild(det); box.appendChild(answer);
  const body = {model, messages: history, stream: true, reasoning_effort: document.getElementById('effort').value,
                max_tokens: parseInt(document.getElementById('maxtok').value) || 256};
  document.getElementById('send').disabled = true;
  try {
    const res = await api('/v1/chat/completions', {method: 'POST', body: JSON.stringify(body)});
    if (!res.ok) { const j = await res.json(); throw new Error(j.error ? j.error.message : res.statusText); }
    const reader = res.body.getReader(), dec = new TextDecoder();
    let buf = '', content = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += dec.decode(value, {stream: true});
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const line = buf.slice(0, i).trim(); buf = buf.slice(i + 2);
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        const d = j.choices && j.choices[0] && j.choices[0].delta;
        if (!d) continue;
        if (d.reasoning_content) { det.style.display = ''; reasoning.textContent += d.reasoning_content; }
        if (d.content) { content += d.content; answer.textContent = content; }
      }
    }
    history.push({role: 'assistant', content});
  } catch (e) {
    const p = document.createElement('div'); p.className = 'err'; p.textContent = 'Error: ' + e.message; box.appendChild(p);
  }
  document.getElementById('send').disabled = false;
  window.scrollTo(0, document.body.scrollHeight);
});
input.addEventListener('keydown', (e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); document.getElementById('f').requestSubmit(); } });
</script></body></html>
)HTML";

}  // namespace

void handle_web_page(ServerContext&, const httplib::Request&, httplib::Response& res) {
  res.set_content(kPage, "text/html; charset=utf-8");
}

}  // namespace mx::server
