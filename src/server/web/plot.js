// Time-series plots for the dashboard (MX.Plot): uPlot when it was bundled, else a simple canvas
// line chart. Keeps the last `keep` points; the container's data-points and data-last attributes
// say what it holds (read by the tests).
'use strict';
(() => {
  const hasUplot = typeof window.uPlot !== 'undefined';
  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

  class Plot {
    // opts: { title, unit, series: [{ label, color }], keep = 300, min = 0, minMax (least top of the
    // y axis), digits = 1, points (dots as well as lines: for sparse series) }
    constructor(container, opts) {
      this.box = container;
      this.opts = Object.assign({ keep: 300, digits: 1 }, opts);
      this.data = [[], ...this.opts.series.map(() => [])];
      this.box.classList.add('plot');
      this.head = MX.el('div', { class: 'plot-head' }, MX.el('b', { text: this.opts.title }));
      this.legend = MX.el('div', { class: 'plot-legend' });
      this.area = MX.el('div', { class: 'plot-area' });
      this.box.append(this.head, this.area, this.legend);
      this.build();
      new ResizeObserver(() => this.resize()).observe(this.area);
      document.addEventListener('mx-theme', () => this.build());
    }

    size() { return { width: Math.max(200, this.area.clientWidth), height: 170 }; }

    build() {
      if (this.u) { this.u.destroy(); this.u = null; }
      this.area.replaceChildren();
      if (!hasUplot) {
        this.canvas = MX.el('canvas');
        this.area.append(this.canvas);
        this.draw();
        return;
      }
      const fg = css('--muted'), grid = css('--border'), o = this.opts;
      const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
      this.u = new uPlot({
        ...this.size(),
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: (u, lo, hi) => [o.min ?? 0, Math.max(hi * 1.1, o.minMax ?? 1)] } },
        axes: [axis, { ...axis, size: 56, values: (u, ticks) => ticks.map((v) => +v.toFixed(3)) }],
        series: [{}, ...o.series.map((s) => ({ label: s.label, stroke: s.color, width: 2, spanGaps: false,
          points: { show: !!o.points, size: 5, fill: s.color } }))],
      }, this.data, this.area);
    }

    resize() {
      if (this.u) this.u.setSize(this.size());
      else this.draw();
    }

    // t: unix seconds; values: one per series (null: no value at t).
    push(t, values) {
      this.data[0].push(t);
      values.forEach((v, i) => this.data[i + 1].push(v === undefined ? null : v));
      if (this.data[0].length > this.opts.keep) for (const a of this.data) a.shift();
      this.box.dataset.points = String(this.data[0].length);
      this.box.dataset.last = JSON.stringify(values);
      this.legend.replaceChildren(...this.opts.series.map((s, i) => MX.el('span', {},
        MX.el('i', { style: `background:${s.color}` }), `${s.label} `,
        MX.el('b', { text: values[i] === null || values[i] === undefined ? '–' : (+values[i]).toFixed(this.opts.digits) }),
        this.opts.unit ? ` ${this.opts.unit}` : '')));
      if (this.u) this.u.setData(this.data);
      else this.draw();
    }

    // The fallback: lines over [0, max] with the max and the time span written on the canvas.
    draw() {
      const c = this.canvas;
      if (!c) return;
      const { width, height } = this.size(), dpr = window.devicePixelRatio || 1;
      c.width = width * dpr; c.height = height * dpr;
      c.style.width = width + 'px'; c.style.height = height + 'px';
      const g = c.getContext('2d');
      g.scale(dpr, dpr);
      g.clearRect(0, 0, width, height);
      const xs = this.data[0], pad = { l: 46, r: 8, t: 8, b: 18 };
      let max = this.opts.minMax ?? 1;
      for (const s of this.data.slice(1)) for (const v of s) if (v !== null && v > max) max = v;
      max *= 1.1;
      g.strokeStyle = css('--border'); g.fillStyle = css('--muted'); g.font = '11px system-ui, sans-serif';
      g.strokeRect(pad.l, pad.t, width - pad.l - pad.r, height - pad.t - pad.b);
      g.fillText(+max.toPrecision(3) + '', 4, pad.t + 10);
      g.fillText('0', 4, height - pad.b);
      if (xs.length < 2) return;
      const t0 = xs[0], span = Math.max(1e-9, xs[xs.length - 1] - t0);
      g.fillText(`last ${Math.round(span)} s`, pad.l, height - 4);
      const X = (t) => pad.l + ((t - t0) / span) * (width - pad.l - pad.r);
      const Y = (v) => height - pad.b - (v / max) * (height - pad.t - pad.b);
      this.opts.series.forEach((s, i) => {
        g.strokeStyle = s.color; g.lineWidth = 2; g.beginPath();
        let pen = false;
        this.data[i + 1].forEach((v, k) => {
          if (v === null) { pen = false; return; }
          if (pen) g.lineTo(X(xs[k]), Y(v)); else g.moveTo(X(xs[k]), Y(v));
          pen = true;
        });
        g.stroke();
        if (this.opts.points) {
          g.fillStyle = s.color;
          this.data[i + 1].forEach((v, k) => { if (v !== null) g.fillRect(X(xs[k]) - 2, Y(v) - 2, 4, 4); });
        }
      });
    }
  }
  Plot.simple = !hasUplot;
  MX.Plot = Plot;
})();
