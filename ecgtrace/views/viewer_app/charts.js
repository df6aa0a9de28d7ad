/* Plot specs (ecgtrace.views.plots) drawn as SVG in the browser: the same geometry and classes as
 * ecgtrace/views/svg.py (the static report's drawer), plus clicks that filter the sample table. */
"use strict";

(function (V) {
  const W = 760, H = 300;
  const M = { left: 52, right: 16, top: 34, bottom: 92 };
  const CELL = [78, 26], HEAT_LEFT = 190, HEAT_TOP = 110;
  const s = V.s;

  function frame(spec, width, height, body) {
    const svg = s("svg", { class: "plot", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": spec.title || "" },
      s("text", { class: "title", x: M.left, y: 18, text: spec.title || "" }), body);
    return V.h("figure", { class: "chart", id: "chart-" + spec.id, "data-type": spec.type }, svg,
      V.h("figcaption", { text: spec.caption || "" }));
  }

  function fmt(v, percent) {
    return percent ? (100 * v).toFixed(1) + "%" : v.toFixed(1);
  }

  function yAxis(ymax, percent, plotH) {
    const out = [];
    for (let i = 0; i < 5; i++) {
      const v = ymax * i / 4;
      const y = M.top + plotH - plotH * i / 4;
      out.push(s("line", { class: "grid", x1: M.left, x2: W - M.right, y1: y, y2: y }));
      out.push(s("text", { class: "tick", x: M.left - 6, y: y + 4, "text-anchor": "end", text: percent ? (100 * v).toFixed(0) + "%" : String(+v.toFixed(2)) }));
    }
    return out;
  }

  function xLabel(x, y, label, up) {
    return s("text", { class: "tick", transform: `translate(${x.toFixed(1)},${y.toFixed(1)}) rotate(${up ? -40 : -35})`,
                       "text-anchor": up ? "start" : "end", text: label });
  }

  function clickable(group, linkTo, onLink) {
    if (!linkTo || !onLink) return group;
    group.setAttribute("class", group.getAttribute("class") + " link");
    group.setAttribute("tabindex", "0");
    group.addEventListener("click", () => onLink(linkTo));
    group.addEventListener("keydown", (ev) => { if (ev.key === "Enter") onLink(linkTo); });
    return group;
  }

  function bars(spec, onLink) {
    const percent = !!spec.percent;
    const ymax = spec.ymax || Math.max(1, ...spec.bars.map((b) => b.hi));
    const plotW = W - M.left - M.right, plotH = H - M.top - M.bottom;
    const slot = plotW / Math.max(1, spec.bars.length);
    const y = (v) => M.top + plotH * (1 - Math.max(0, Math.min(v, ymax)) / ymax);
    const body = yAxis(ymax, percent, plotH);
    spec.bars.forEach((bar, i) => {
      const x0 = M.left + i * slot + slot * 0.18, w = slot * 0.64, cx = x0 + w / 2;
      const counts = bar.k !== undefined ? ` (${bar.k}/${bar.n})` : ` (n=${bar.n})`;
      const tip = `${bar.label}: ${fmt(bar.value, percent)} [${fmt(bar.lo, percent)}, ${fmt(bar.hi, percent)}]${counts}`;
      body.push(clickable(s("g", { class: "bar-group" }, s("title", { text: tip }),
        s("rect", { class: "bar", x: x0, y: y(bar.value), width: w, height: y(0) - y(bar.value) }),
        s("line", { class: "ci", x1: cx, x2: cx, y1: y(bar.lo), y2: y(bar.hi) }),
        s("line", { class: "ci", x1: x0 + w * 0.35, x2: x0 + w * 0.65, y1: y(bar.lo), y2: y(bar.lo) }),
        s("line", { class: "ci", x1: x0 + w * 0.35, x2: x0 + w * 0.65, y1: y(bar.hi), y2: y(bar.hi) }),
        s("text", { class: "value", x: cx, y: y(bar.hi) - 4, "text-anchor": "middle", text: fmt(bar.value, percent) })), bar.link, onLink));
      for (const ref of spec.refs || []) {
        const level = ref.values[i];
        if (level === null || level === undefined) continue;
        body.push(s("line", { class: "ref ref-" + ref.name, x1: x0 - slot * 0.1, x2: x0 + w + slot * 0.1, y1: y(level), y2: y(level) },
          s("title", { text: `${ref.name} ${fmt(level, percent)}` })));
      }
      body.push(xLabel(cx, y(0) + 12, bar.label, false));
    });
    let x = W - M.right - 120 * (spec.refs || []).length;
    for (const ref of spec.refs || []) {
      body.push(s("line", { class: "ref ref-" + ref.name, x1: x, x2: x + 26, y1: 14, y2: 14 }));
      body.push(s("text", { class: "tick", x: x + 32, y: 18, text: ref.name }));
      x += 120;
    }
    return frame(spec, W, H, body);
  }

  function niceTop(count) {
    return Math.max(4, Math.ceil(count / 4) * 4);
  }

  function histogram(spec) {
    const top = niceTop(Math.max(1, ...spec.bins.map((b) => b.count)));
    const plotW = W - M.left - M.right, plotH = H - M.top - M.bottom;
    const slot = plotW / Math.max(1, spec.bins.length);
    const body = yAxis(top, false, plotH);
    spec.bins.forEach((b, i) => {
      const hgt = plotH * b.count / top, x0 = M.left + i * slot + 2, y0 = M.top + plotH - hgt;
      body.push(s("g", { class: "bar-group" }, s("title", { text: `${b.label}: ${b.count}` }),
        s("rect", { class: "bar hist", x: x0, y: y0, width: slot - 4, height: hgt }),
        s("text", { class: "value", x: x0 + slot / 2 - 2, y: y0 - 4, "text-anchor": "middle", text: String(b.count) })));
      body.push(xLabel(x0 + slot / 2, M.top + plotH + 12, b.label, false));
    });
    body.push(s("text", { class: "tick", x: W - M.right, y: H - 6, "text-anchor": "end", text: spec.xlabel || "" }));
    return frame(spec, W, H, body);
  }

  function heatClass(v) {
    return "h" + Math.max(0, Math.min(10, Math.round(v * 10)));
  }

  function heatmap(spec, onLink) {
    const [cw, ch] = CELL;
    const width = HEAT_LEFT + cw * spec.cols.length + M.right + 90, height = HEAT_TOP + ch * spec.rows.length + 12;
    const body = spec.cols.map((c, j) => xLabel(HEAT_LEFT + cw * (j + 0.3), HEAT_TOP - 6, c, true));
    spec.rows.forEach((r, i) => {
      const y0 = HEAT_TOP + i * ch;
      body.push(s("text", { class: "tick", x: HEAT_LEFT - 6, y: y0 + ch * 0.65, "text-anchor": "end", text: r }));
      spec.cells[i].forEach((cell, j) => {
        const x0 = HEAT_LEFT + j * cw;
        if (!cell) {
          body.push(s("rect", { class: "cell empty", x: x0, y: y0, width: cw, height: ch }));
          return;
        }
        const cls = heatClass(cell.value);
        const tip = `${r} / ${spec.cols[j]}: ${(100 * cell.value).toFixed(1)}% (${cell.k}/${cell.n})`;
        body.push(clickable(s("g", { class: "cell-group" }, s("title", { text: tip }),
          s("rect", { class: "cell " + cls, x: x0, y: y0, width: cw, height: ch }),
          s("text", { class: "cell-text " + cls, x: x0 + cw / 2, y: y0 + ch * 0.65, "text-anchor": "middle", text: (100 * cell.value).toFixed(0) + "%" })),
          cell.link ? Object.assign({ outcome: "wrong" }, cell.link) : null, onLink));
      });
    });
    return frame(spec, width, height, body);
  }

  /** One spec as a <figure>; onLink(filters) is called when a bar or cell is clicked. */
  V.chart = function (spec, onLink) {
    if (spec.type === "bars") return bars(spec, onLink);
    if (spec.type === "histogram") return histogram(spec);
    if (spec.type === "heatmap") return heatmap(spec, onLink);
    return V.h("p", { text: "unknown plot type " + spec.type });
  };
})(window.ECGV);
