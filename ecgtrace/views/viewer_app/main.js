/* Start-up and routing: ?view=overview|samples|compare, ?sample=ID, ?compare=A,B, ?run=N. */
"use strict";

(function (V) {
  const h = V.h;
  let app = null;

  function current() {
    const params = V.readState();
    const run = Math.min(app.runs.length - 1, Math.max(0, parseInt(params.get("run") || "0", 10) || 0));
    const pair = (params.get("compare") || "").split(",").map((x) => parseInt(x, 10));
    const compare = pair.length === 2 && pair.every((x) => x >= 0 && x < app.runs.length) ? pair : null;
    let view = params.get("view") || "overview";
    if (params.get("sample")) view = "sample";
    else if (params.get("compare")) view = "compare";
    return { params, run, compare, view, app };
  }

  function drawNav(ctx) {
    const nav = V.clear(document.getElementById("nav"));
    const item = (view, label) => {
      const p = new URLSearchParams({ run: String(ctx.run), view });
      return V.link(p, label, { class: "tab" + (ctx.view === view || (view === "samples" && ctx.view === "sample" && !ctx.compare) ? " active" : ""), id: "nav-" + view });
    };
    nav.append(item("overview", "Overview"), item("samples", "Samples"));
    if (app.pairs.length) {
      const pair = ctx.compare || app.pairs[0];
      nav.append(V.link(new URLSearchParams({ compare: pair.join(",") }), "Compare", { class: "tab" + (ctx.compare ? " active" : ""), id: "nav-compare" }));
    }
    const select = document.getElementById("run-select");
    select.value = String(ctx.run);
  }

  async function render() {
    const ctx = current();
    drawNav(ctx);
    const main = V.clear(document.getElementById("main"));
    V.setStatus("loading…");
    try {
      await V.views[ctx.view === "sample" ? "sample" : ctx.view in V.views ? ctx.view : "overview"](main, ctx);
      V.setStatus("");
      document.body.dataset.ready = ctx.view;
    } catch (err) {
      V.setStatus("");
      V.add(main, h("p", { class: "warn", text: "Could not show this view: " + err.message }));
      document.body.dataset.ready = "error";
    }
  }

  async function start() {
    try {
      app = await V.load("app");
    } catch (err) {
      V.add(V.clear(document.getElementById("main")), h("p", { class: "warn", text: "No run data found next to this page (data/app.js)." }));
      return;
    }
    const select = document.getElementById("run-select");
    for (const r of app.runs) select.append(h("option", { value: String(r.n), text: `${r.label} · ${r.kind} · ${r.samples} samples` }));
    select.addEventListener("change", () => V.navigate(new URLSearchParams({ run: select.value, view: "overview" })));
    if (app.runs.length < 2) select.parentElement.hidden = true;
    V.onNavigate = render;
    window.addEventListener("popstate", render);
    window.addEventListener("hashchange", render);
    await render();
  }

  document.addEventListener("DOMContentLoaded", start);
})(window.ECGV);
