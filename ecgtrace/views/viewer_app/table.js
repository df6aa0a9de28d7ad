/* The samples table: sort, filter (diagnosis, stage, correct/wrong, parse failure, error, first wrong stage), search, pages. */
"use strict";

(function (V) {
  const h = V.h;
  const PAGE = 100;
  const FILTERS = ["q", "diagnosis", "stage", "outcome", "parse", "error", "first", "pkind"];

  /** The run's index as objects (once per run). */
  const indexCache = new Map();
  V.index = async function (run) {
    if (!indexCache.has(run)) {
      indexCache.set(run, V.load(`r${run}/index`).then((data) => {
        const rows = data.rows.map((r, i) => {
          const o = { pos: i };
          data.columns.forEach((c, j) => { o[c] = r[j]; });
          return o;
        });
        return { kind: data.kind, rows, byId: new Map(rows.map((r) => [r.id, r])) };
      }));
    }
    return indexCache.get(run);
  };

  V.searchTexts = (run) => V.load(`r${run}/text`).then((d) => d.texts);

  function matches(row, f, texts) {
    if (f.diagnosis && row.diagnosis !== f.diagnosis) return false;
    if (f.pkind && row.pkind !== f.pkind) return false;
    if (f.stage) {
      if (!row.stages.includes(f.stage)) return false;
      if (f.outcome === "wrong" && !row.wrong.includes(f.stage)) return false;
      if (f.outcome === "correct" && row.wrong.includes(f.stage)) return false;
    } else if (f.outcome === "correct" && row.correct !== true) return false;
    else if (f.outcome === "wrong" && row.correct !== false) return false;
    if (f.parse === "yes" && !(row.parse > 0)) return false;
    if (f.parse === "no" && row.parse > 0) return false;
    if (f.error === "yes" && !(row.errors > 0)) return false;
    if (f.error === "no" && row.errors > 0) return false;
    if (f.first === "none" && row.first_wrong !== null) return false;
    if (f.first && f.first !== "none" && row.first_wrong !== f.first) return false;
    if (f.q) {
      const text = texts ? texts[row.pos] : row.id.toLowerCase();
      for (const term of f.q.toLowerCase().split(/\s+/).filter(Boolean)) if (!text.includes(term)) return false;
    }
    return true;
  }

  function compare(a, b) {
    if (a === b) return 0;
    if (a === null || a === undefined) return 1;
    if (b === null || b === undefined) return -1;
    if (typeof a === "number" && typeof b === "number") return a - b;
    return String(a).localeCompare(String(b), "en", { numeric: true });
  }

  /** The samples that pass the filters in ``params``, sorted as asked. */
  V.filterSamples = function (index, params, texts) {
    const f = {};
    for (const k of FILTERS) f[k] = params.get(k) || "";
    const out = index.rows.filter((r) => matches(r, f, texts));
    const col = params.get("sort");
    if (col) {
      const dir = params.get("dir") === "desc" ? -1 : 1;
      const key = col === "turns" ? "score" : col;
      out.sort((a, b) => dir * compare(a[key], b[key]) || a.pos - b.pos);
    }
    return out;
  };

  V.filterParams = function (params) {
    const out = new URLSearchParams();
    for (const k of [...FILTERS, "sort", "dir"]) if (params.get(k)) out.set(k, params.get(k));
    return out;
  };

  function columns(kind) {
    const fmtBool = (v) => (v === true ? "yes" : v === false ? "no" : "–");
    if (kind === "probe") {
      return [["id", "pair", (r) => r.id], ["pkind", "kind", (r) => r.pkind], ["source", "source", (r) => r.source],
        ["diagnosis", "diagnosis / finding", (r) => r.diagnosis || r.task || ""],
        ["followed", "answer did what it should", (r) => `${r.followed}/${r.paired}`],
        ["right", "right on original", (r) => `${r.right}/${r.asked}`], ["cf_right", "right on edited", (r) => `${r.cf_right}/${r.cf_asked}`],
        ["errors", "errors", (r) => String(r.errors)], ["tokens", "tokens", (r) => V.num(r.tokens)]];
    }
    if (kind === "qa") {
      return [["id", "id", (r) => r.id], ["task", "task", (r) => r.task], ["diagnosis", "finding", (r) => r.diagnosis || ""],
        ["score", "score", (r) => V.num(r.score, 1)], ["correct", "correct", (r) => fmtBool(r.correct)],
        ["parse", "parse failures", (r) => String(r.parse)], ["errors", "errors", (r) => String(r.errors)],
        ["latency_ms", "latency (s)", (r) => V.num(r.latency_ms / 1000, 2)], ["tokens", "tokens", (r) => V.num(r.tokens)]];
    }
    return [["id", "id", (r) => r.id], ["diagnosis", "diagnosis", (r) => r.diagnosis], ["label", "label", (r) => fmtBool(r.label)],
      ["turns", "turns right", (r) => `${r.right}/${r.asked}`], ["first_wrong", "first wrong", (r) => r.first_wrong || "none"],
      ["depth", "depth", (r) => (r.depth === null ? "–" : r.depth.toFixed(2))], ["parse", "parse failures", (r) => String(r.parse)],
      ["errors", "errors", (r) => String(r.errors)], ["latency_ms", "latency (s)", (r) => V.num(r.latency_ms / 1000, 2)],
      ["tokens", "tokens", (r) => V.num(r.tokens)]];
  }

  function select(name, label, values, current, render) {
    const sel = h("select", { id: "f-" + name, name, "aria-label": label, onchange: () => render({ [name]: sel.value }) },
      values.map(([v, text]) => h("option", { value: v, text, selected: v === current })));
    return h("label", { class: "filter" }, label + " ", sel);
  }

  function uniq(values) {
    return [...new Set(values.filter((v) => v !== null && v !== undefined && v !== ""))].sort((a, b) => compare(a, b));
  }

  /** The search box and the filter selects (their values are the URL's); ``update(changes)`` applies a change. */
  function filterControls(index, params, update) {
    const qa = index.kind === "qa";
    const stages = uniq(index.rows.flatMap((r) => r.stages));
    const search = h("input", { type: "search", id: "f-q", placeholder: "search ids and answers", value: params.get("q") || "", "aria-label": "search" });
    let timer = null;
    search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => update({ q: search.value.trim() }), 150); });
    const any = [["", "any"]];
    const controls = [search,
      select("diagnosis", qa ? "finding" : "diagnosis", any.concat(uniq(index.rows.map((r) => r.diagnosis)).map((v) => [v, v])), params.get("diagnosis") || "", update),
      select("stage", qa ? "task" : "stage", any.concat(stages.map((v) => [v, v])), params.get("stage") || "", update),
      select("outcome", "outcome", any.concat([["correct", "correct"], ["wrong", "wrong"]]), params.get("outcome") || "", update),
      select("parse", "parse failure", any.concat([["yes", "yes"], ["no", "no"]]), params.get("parse") || "", update),
      select("error", "server error", any.concat([["yes", "yes"], ["no", "no"]]), params.get("error") || "", update)];
    if (index.kind === "probe") {
      controls.splice(1, 0, select("pkind", "kind", any.concat(["remove", "move", "swap", "control"].map((v) => [v, v])), params.get("pkind") || "", update));
    }
    if (!qa) {
      const firsts = uniq(index.rows.map((r) => r.first_wrong));
      controls.push(select("first", "first wrong stage", any.concat([["none", "none (no wrong turn)"]], firsts.map((v) => [v, v])), params.get("first") || "", update));
    }
    controls.push(h("button", { type: "button", id: "f-reset", text: "reset", onclick: () => {
      for (const k of [...FILTERS, "sort", "dir", "page"]) params.delete(k);
      V.navigate(params, { replace: true });
    } }));
    return controls;
  }

  V.views.samples = async function (root, ctx) {
    const index = await V.index(ctx.run);
    const params = ctx.params;
    let texts = params.get("q") ? await V.searchTexts(ctx.run) : null;
    const bar = h("form", { class: "filters", id: "filters", onsubmit: (ev) => ev.preventDefault() });
    const body = h("div", { id: "table-wrap" });
    V.add(root, h("h2", { text: `Samples · ${ctx.app.runs[ctx.run].label}` }), bar, body);

    const update = async (changes) => {
      for (const [k, v] of Object.entries(changes)) {
        if (v) params.set(k, v); else params.delete(k);
      }
      if (!("page" in changes)) params.delete("page");
      if (params.get("q") && !texts) texts = await V.searchTexts(ctx.run);
      try { history.replaceState(null, "", V.stateUrl(params)); } catch (err) { /* file:// without history: the filters still apply */ }
      draw();
    };

    bar.append(...filterControls(index, params, update));

    function draw() {
      const list = V.filterSamples(index, params, texts);
      const pages = Math.max(1, Math.ceil(list.length / PAGE));
      const page = Math.min(pages - 1, Math.max(0, parseInt(params.get("page") || "0", 10) || 0));
      const cols = columns(index.kind);
      const sortCol = params.get("sort"), dir = params.get("dir") === "desc" ? "desc" : "asc";
      const head = h("tr", null, cols.map(([key, label]) => h("th", { scope: "col", "aria-sort": sortCol === key ? (dir === "asc" ? "ascending" : "descending") : "none" },
        h("button", { type: "button", class: "sort", "data-col": key, text: label + (sortCol === key ? (dir === "asc" ? " ▲" : " ▼") : ""),
          onclick: () => update({ sort: key, dir: sortCol === key && dir === "asc" ? "desc" : "asc" }) }))));
      const keep = V.filterParams(params);
      const rows = list.slice(page * PAGE, (page + 1) * PAGE).map((r) => {
        const p = new URLSearchParams(keep);
        p.set("run", String(ctx.run));
        p.set("sample", r.id);
        const cls = r.correct === true ? "ok" : r.correct === false ? "bad" : "na";
        return h("tr", { class: "row " + cls, "data-id": r.id }, cols.map(([key, , fmt], j) => h("td", { class: "c-" + key },
          j === 0 ? V.link(p, r.id) : fmt(r))));
      });
      const pager = h("div", { class: "pager" },
        h("button", { type: "button", id: "prev-page", text: "‹ prev", disabled: page === 0, onclick: () => update({ page: String(page - 1) }) }),
        h("span", { id: "page-info", text: ` page ${page + 1} of ${pages} · ` }),
        h("span", { id: "match-count", text: `${list.length} of ${index.rows.length} samples` }),
        h("button", { type: "button", id: "next-page", text: "next ›", disabled: page >= pages - 1, onclick: () => update({ page: String(page + 1) }) }));
      V.add(V.clear(body), pager, h("table", { class: "grid samples", id: "samples-table" }, h("thead", null, head), h("tbody", null, rows)));
      V.setStatus("");
    }
    draw();
  };
})(window.ECGV);
