// Answers as HTML (MX.render): Markdown through marked, sanitized by DOMPurify, code highlighted by
// highlight.js with a copy button, math ($...$, \(...\), $$...$$, \[...\]) typeset by KaTeX.
// Each library is optional: without marked or DOMPurify the answer is plain text, and
// MX.render.missing() names what is absent for the page's note.
'use strict';
(() => {
  const hasMarked = typeof window.marked !== 'undefined' && typeof window.DOMPurify !== 'undefined';
  const hasHljs = typeof window.hljs !== 'undefined';
  const hasKatex = typeof window.katex !== 'undefined';
  const escapeHtml = (s) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

  // Math stays as escaped TeX in a .math element through the sanitizer; KaTeX renders it after.
  const mathExtensions = [
    { name: 'mathBlock', level: 'block',
      start(src) { const m = src.match(/\$\$|\\\[/); return m ? m.index : undefined; },
      tokenizer(src) {
        const m = /^\$\$([\s\S]+?)\$\$/.exec(src) || /^\\\[([\s\S]+?)\\\]/.exec(src);
        if (m) return { type: 'mathBlock', raw: m[0], text: m[1].trim() };
      },
      renderer(t) { return `<div class="math" data-display="1">${escapeHtml(t.text)}</div>\n`; } },
    { name: 'mathInline', level: 'inline',
      start(src) { const m = src.match(/\$|\\\(/); return m ? m.index : undefined; },
      tokenizer(src) {
        let m = /^\$\$([^$]+?)\$\$/.exec(src);
        if (m) return { type: 'mathInline', raw: m[0], text: m[1].trim(), display: true };
        m = /^\\\(([\s\S]+?)\\\)/.exec(src) || /^\$(?![\s$])([^$\n]+?)(?<!\s)\$(?!\d)/.exec(src);
        if (m) return { type: 'mathInline', raw: m[0], text: m[1], display: false };
      },
      renderer(t) { return `<span class="math" data-display="${t.display ? 1 : 0}">${escapeHtml(t.text)}</span>`; } },
  ];

  let md = null;
  if (hasMarked) {
    md = new marked.Marked({ gfm: true, breaks: false });
    md.use({ extensions: mathExtensions });
    // Links open elsewhere; images would be fetched from outside, so the model cannot embed any.
    DOMPurify.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A') { node.setAttribute('target', '_blank'); node.setAttribute('rel', 'noopener noreferrer'); }
    });
  }
  if (hasHljs) hljs.configure({ ignoreUnescapedHTML: true });

  MX.copyText = async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
    } catch (e) {  // no clipboard API outside secure contexts (http on another host)
      const t = MX.el('textarea', { style: 'position:fixed;left:-9999px' });
      t.value = text;
      document.body.append(t);
      t.select();
      document.execCommand('copy');
      t.remove();
    }
  };

  function copyButton(getText) {
    const b = MX.el('button', { class: 'copy', type: 'button', text: 'Copy' });
    b.addEventListener('click', async () => {
      await MX.copyText(getText());
      b.textContent = 'Copied';
      setTimeout(() => { b.textContent = 'Copy'; }, 1200);
    });
    return b;
  }

  // The finishing touches on sanitized HTML: math, highlighting, copy buttons, scrolling tables.
  function decorate(el, { highlight }) {
    for (const m of el.querySelectorAll('.math')) {
      if (!hasKatex) { m.classList.add('math-src'); continue; }
      const tex = m.textContent;
      try {
        katex.render(tex, m, { displayMode: m.dataset.display === '1', throwOnError: false, output: 'htmlAndMathml' });
      } catch (e) { m.textContent = tex; m.classList.add('math-src'); }
    }
    for (const pre of el.querySelectorAll('pre')) {
      const code = pre.querySelector('code');
      if (!code) continue;
      if (highlight && hasHljs) hljs.highlightElement(code);
      pre.append(copyButton(() => code.textContent));
    }
    for (const table of el.querySelectorAll('table')) {
      const wrap = MX.el('div', { class: 'table-wrap' });
      table.replaceWith(wrap);
      wrap.append(table);
    }
  }

  // Renders `text` into `el`; `streaming`: a partial answer (highlighting waits for the end).
  function render(el, text, { streaming = false } = {}) {
    if (!md) {
      el.classList.add('plain');
      el.textContent = text;
      return;
    }
    const html = md.parse(text);
    el.innerHTML = DOMPurify.sanitize(html, { FORBID_TAGS: ['img', 'style', 'form', 'input', 'button', 'textarea', 'select'] });
    decorate(el, { highlight: !streaming });
  }

  render.missing = function missing() {
    const out = [];
    if (!hasMarked) out.push('Markdown (answers are shown as plain text)');
    if (!hasHljs) out.push('code highlighting');
    if (!hasKatex) out.push('math typesetting (TeX is shown as written)');
    return out;
  };
  render.copyButton = copyButton;
  MX.render = render;
})();
