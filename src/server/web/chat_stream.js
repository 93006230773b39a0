// One streamed chat completion (MX.streamChat): POSTs /v1/chat/completions with stream and
// include_usage, parses the server-sent events and calls back per delta: reasoning
// (delta.reasoning_content), content, tool calls (delta.tool_calls, merged by index), the usage
// chunk and the finish reason. Stopped through the AbortSignal.
'use strict';
(() => {
  // Each `data:` payload of a block of SSE text; returns the unparsed rest.
  function takeEvents(buf, onData) {
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (data) onData(data);
    }
    return buf;
  }

  // cb: { onReasoning(text), onContent(text), onToolCalls(list), onUsage(usage), onFinish(reason) }.
  MX.streamChat = async function streamChat(body, signal, cb) {
    const res = await MX.api('/v1/chat/completions', { method: 'POST', body: JSON.stringify(body), signal });
    if (!res.ok) throw new Error(await MX.errorOf(res));
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    const tools = [];
    let buf = '', done = false;
    const onData = (data) => {
      if (data === '[DONE]') { done = true; return; }
      const j = JSON.parse(data);
      if (j.error) throw new Error(j.error.message || 'the server reported an error');
      if (j.usage) cb.onUsage(j.usage);
      const choice = j.choices && j.choices[0];
      if (!choice) return;
      const d = choice.delta || {};
      if (d.reasoning_content) cb.onReasoning(d.reasoning_content);
      if (d.content) cb.onContent(d.content);
      if (Array.isArray(d.tool_calls)) {
        for (const t of d.tool_calls) {
          const slot = tools[t.index] || (tools[t.index] = { id: '', type: 'function', function: { name: '', arguments: '' } });
          if (t.id) slot.id = t.id;
          if (t.function && t.function.name) slot.function.name = t.function.name;
          if (t.function && t.function.arguments) slot.function.arguments += t.function.arguments;
        }
        cb.onToolCalls(tools.filter(Boolean));
      }
      if (choice.finish_reason) cb.onFinish(choice.finish_reason);
    };
    while (!done) {
      const { value, done: end } = await reader.read();
      if (end) break;
      buf = takeEvents(buf + dec.decode(value, { stream: true }), onData);
    }
    takeEvents(buf + dec.decode() + '\n\n', onData);
  };

  // The request body for `messages` under `settings` (chat_store.js's settings object).
  MX.chatBody = function chatBody(model, settings, messages) {
    const out = [];
    if (settings.instructions && settings.instructions.trim()) out.push({ role: 'system', content: settings.instructions });
    for (const m of messages) {
      if (m.role === 'user') out.push({ role: 'user', content: m.content });
      else if (m.content) out.push({ role: 'assistant', content: m.content });  // earlier reasoning is not sent back
    }
    return { model, messages: out, stream: true, stream_options: { include_usage: true },
      temperature: Number(settings.temperature), top_p: Number(settings.top_p),
      max_tokens: Number(settings.max_tokens), reasoning_effort: settings.reasoning_effort };
  };
})();
