/* Two runs on the same samples: McNemar per metric and stage (or task), and the turns where they differ. */
"use strict";

(function (V) {
  const h = V.h;
  const PAGE = 100;

  function pairPicker(ctx, a, b) {
    const options = ctx.app.pairs.map(([x, y]) => h("option", { value: `${x},${y}`, text: `${ctx.app.runs[x].label}  vs  ${ctx.app.runs[y].label}`,
      selected: x === a && y === b }));
    const sel = h("select", { id: "pair-select", "aria-label": "runs to compare", onchange: () => {
      V.navigate(new URLSearchParams({ compare: sel.value }));
    } }, options);
    return h("label", { class: "filter" }, "compare ", sel);
  }

  function outcome(v) {
    return v === true ? "right" : v === false ? "wrong" : "–";
  }

  V.views.compare = async function (root, ctx) {
    if (!ctx.app.pairs.length) {
      V.add(root, h("p", { class: "note", text: "Give two runs of the same kind that share samples to compare them: ecgtrace view RUN_A RUN_B" }));
      return;
    }
    const [a, b] = ctx.compare || ctx.app.pairs[0];
    const data = await V.load(`cmp/${a}-${b}`);
    V.add(root, h("h2", { text: "Two runs side by side" }), pairPicker(ctx, a, b));
    if (data.error) {
      V.add(root, h("p", { class: "warn", text: data.error }));
      return;
    }
    for (const w of data.warnings) V.add(root, h("p", { class: "warn", text: "warning: " + w }));
    V.add(root, h("p", { class: "note", text: `A = ${data.labels[0]} · B = ${data.labels[1]} · shared samples ${data.shared} · only in A ${data.only_a} · only in B ${data.only_b}` }));
    const rows = Object.entries(data.tests).map(([key, t]) => h("tr", { class: t.p_value < 0.05 ? "signif" : null },
      h("td", { text: key }), h("td", { text: V.num(t.n) }), h("td", { text: V.pct(t.acc_a) }), h("td", { text: V.pct(t.acc_b) }),
      h("td", { text: V.num(t.b) }), h("td", { text: V.num(t.c) }), h("td", { text: t.method }), h("td", { text: V.pvalue(t.p_value) })));
    V.add(root, h("h3", { text: "McNemar tests on paired outcomes" }),
      h("table", { class: "grid num", id: "mcnemar" }, h("thead", null, h("tr", null,
        ["metric", "n pairs", "acc A", "acc B", "A right, B wrong", "A wrong, B right", "test", "p"].map((x) => h("th", { scope: "col", text: x })))),
      h("tbody", null, rows)),
      h("p", { class: "note", text: "exact binomial test below 25 discordant pairs, else chi-square with continuity correction; bold: p < 0.05" }));

    const page = Math.max(0, parseInt(ctx.params.get("page") || "0", 10) || 0);
    const pages = Math.max(1, Math.ceil(data.diffs.length / PAGE));
    const link = (d) => V.link(new URLSearchParams({ compare: `${a},${b}`, sample: d.id }), d.id);
    const body = data.diffs.slice(page * PAGE, (page + 1) * PAGE).map((d) => h("tr", null,
      h("td", null, link(d)), h("td", { text: String(d.index) }), h("td", { text: [d.stage, d.kind].filter(Boolean).join(" · ") }),
      h("td", { text: V.asText(d.truth) }), h("td", { class: d.a_ok ? "ok-text" : "bad-text", text: V.asText(d.a_parsed) + " (" + outcome(d.a_ok) + ")" }),
      h("td", { class: d.b_ok ? "ok-text" : "bad-text", text: V.asText(d.b_parsed) + " (" + outcome(d.b_ok) + ")" })));
    const turnPage = (p) => V.navigate(new URLSearchParams({ compare: `${a},${b}`, page: String(p) }));
    V.add(root, h("h3", { text: `Turns where they differ (${data.diffs_total})` }),
      data.diffs_total > data.diffs.length ? h("p", { class: "note", text: `the first ${data.diffs.length} are listed` }) : null,
      h("div", { class: "pager" },
        h("button", { type: "button", text: "‹ prev", disabled: page === 0, onclick: () => turnPage(page - 1) }),
        h("span", { text: ` page ${page + 1} of ${pages} ` }),
        h("button", { type: "button", text: "next ›", disabled: page >= pages - 1, onclick: () => turnPage(page + 1) })),
      h("table", { class: "grid", id: "diffs" }, h("thead", null, h("tr", null,
        ["sample", "turn", "stage", "truth", "A answered", "B answered"].map((x) => h("th", { scope: "col", text: x })))), h("tbody", null, body)));
  };
})(window.ECGV);
