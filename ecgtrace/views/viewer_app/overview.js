/* Overview of one run: headline metrics, plots (click a bar or a cell to see its samples), tokens and cost, run facts. */
"use strict";

(function (V) {
  const h = V.h;

  function metricCard(m) {
    const value = m.percent ? V.pct(m.value) : V.num(m.value, 2);
    const lo = m.percent ? V.pct(m.ci95[0]) : V.num(m.ci95[0], 2);
    const hi = m.percent ? V.pct(m.ci95[1]) : V.num(m.ci95[1], 2);
    const counts = m.k !== null && m.k !== undefined ? `${m.k}/${m.n}` : `n=${m.n}`;
    return h("div", { class: "card", "data-metric": m.key },
      h("div", { class: "card-name", text: m.name }),
      h("div", { class: "card-value", text: value }),
      h("div", { class: "card-ci", text: `95% CI [${lo}, ${hi}] · ${counts}` }),
      m.chance !== null && m.chance !== undefined ? h("div", { class: "card-ci card-chance", text: `chance ${V.pct(m.chance)}` }) : null);
  }

  function table(headers, rows, cls) {
    return h("table", { class: cls || "grid" },
      h("thead", null, h("tr", null, headers.map((x) => h("th", { scope: "col", text: x })))),
      h("tbody", null, rows.map((r) => h("tr", null, r.map((c) => h("td", { text: c }))))));
  }

  function usageTable(usage) {
    const money = (v) => (v === null || v === undefined ? "no price" : "$" + v.toFixed(4));
    const rows = usage.per_model.map((m) => [m.model, m.role, V.num(m.requests), V.num(m.reported), V.num(m.prompt_tokens),
      V.num(m.completion_tokens), V.num(m.total_tokens), money(m.cost_usd)]);
    const t = usage.total;
    rows.push(["total", "", V.num(t.requests), V.num(t.reported), V.num(t.prompt_tokens), V.num(t.completion_tokens),
      V.num(t.total_tokens), money(t.cost_usd)]);
    const price = usage.price ? `price: $${usage.price.in_per_mtok} / $${usage.price.out_per_mtok} per 1M input / output tokens`
      : "the run names no price: tokens only";
    return h("section", { class: "usage", id: "usage" }, h("h3", { text: "Tokens and cost" }),
      table(["model", "role", "requests", "with usage", "prompt tokens", "completion tokens", "total tokens", "cost"], rows, "grid num"),
      h("p", { class: "note", text: price + " · tokens as the server reported them (requests without usage count as none)" }));
  }

  /** A probe run's paired metrics per counterfactual kind (value and Wilson interval; chance under it). */
  function perKindTable(perKind) {
    const names = [["sensitivity", "sensitivity"], ["grounded_accuracy", "grounded accuracy"], ["localization_follow", "localization follow"],
      ["invariance", "invariance"]];
    const cell = (metrics, key) => {
      const m = metrics.find((x) => x.key === key);
      if (!m) return "–";
      return `${V.pct(m.value)} [${V.pct(m.ci95[0])}, ${V.pct(m.ci95[1])}] ${m.k}/${m.n}` + (m.chance !== null && m.chance !== undefined ? ` (chance ${V.pct(m.chance)})` : "");
    };
    const rows = perKind.map((b) => [b.kind, String(b.pairs), ...names.map(([key]) => cell(b.metrics, key)),
      b.mcnemar_p === null || b.mcnemar_p === undefined ? "–" : b.mcnemar_p.toPrecision(3)]);
    return h("section", { class: "per-kind", id: "per-kind" }, h("h3", { text: "By counterfactual kind" }),
      table(["kind", "pairs", ...names.map(([, n]) => n), "McNemar p"], rows, "grid num"),
      h("p", { class: "note", text: "sensitivity: the answer changes when the evidence is removed or an opposite window is shown; grounded accuracy: right on both; " +
        "localization follow: the chosen span moves with a moved event; invariance: the answer stays after a control edit. 95% Wilson intervals; chance: a uniform random answerer." }));
  }

  V.views.overview = async function (root, ctx) {
    const data = await V.load(`r${ctx.run}/overview`);
    const goSamples = (filters) => {
      const p = new URLSearchParams({ run: String(ctx.run), view: "samples" });
      for (const [k, v] of Object.entries(filters)) p.set(k, v);
      V.navigate(p);
    };
    V.add(root, h("h2", { text: `Overview · ${data.label}` }));
    if (data.complete === false) V.add(root, h("p", { class: "warn", text: "Incomplete run: not every item has finished." }));
    V.add(root, h("div", { class: "cards" }, data.metrics.map(metricCard)));
    if (data.turns) {
      V.add(root, h("p", { class: "note", text: `turns with a server error: ${data.turns.errors} · parse failures: ${data.turns.parse_failures}` +
        (data.turns.not_asked ? ` · not asked (stop mode): ${data.turns.not_asked}` : "") }));
    }
    if (data.per_kind) V.add(root, perKindTable(data.per_kind));
    const plots = h("section", { class: "plots", id: "plots" });
    for (const spec of data.plots) plots.append(V.chart(spec, goSamples));
    V.add(root, plots);
    V.add(root, usageTable(data.usage));
    V.add(root, h("section", { class: "facts" }, h("h3", { text: "Run" }), table(["field", "value"], data.facts, "grid kv")));
  };
})(window.ECGV);
