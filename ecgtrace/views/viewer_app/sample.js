/* One sample: every turn as a chat beside the ECG (zoomable; true span green, chosen span blue), the counterfactual pair,
 * and, with ?compare=A,B, the same sample of two runs side by side. */
"use strict";

(function (V) {
  const h = V.h;

  function badge(turn) {
    if (turn.asked === false) return h("span", { class: "badge na", text: "not asked" });
    if (turn.correct === true) return h("span", { class: "badge ok", text: "correct" });
    if (turn.correct === false) return h("span", { class: "badge bad", text: "wrong" });
    return h("span", { class: "badge na", text: turn.score === null || turn.score === undefined ? "not scored" : "score " + V.num(turn.score, 1) });
  }

  function tokensText(tokens) {
    if (!tokens || typeof tokens !== "object") return null;
    const parts = [];
    if (tokens.prompt_tokens !== undefined) parts.push(`${tokens.prompt_tokens} in`);
    if (tokens.completion_tokens !== undefined) parts.push(`${tokens.completion_tokens} out`);
    if (tokens.total_tokens !== undefined) parts.push(`${tokens.total_tokens} total`);
    return parts.join(" · ") || V.asText(tokens);
  }

  function fact(name, value, cls) {
    if (value === null || value === undefined || value === "") return null;
    return [h("dt", { text: name }), h("dd", { class: cls || null, text: value })];
  }

  /** One turn as a chat: the examiner's prompt, the model's raw answer (reasoning folded), then what was read and the truth. */
  V.turnView = function (turn, { onShow, figureName, other } = {}) {
    const asked = turn.asked !== false;
    const cls = !asked || turn.correct === null || turn.correct === undefined ? "na" : turn.correct ? "ok" : "bad";
    const where = [`#${turn.index}`, turn.stage, turn.loop !== null && turn.loop !== undefined ? `loop ${turn.loop}` : null, turn.kind]
      .filter((x) => x !== null && x !== undefined && x !== "").join(" · ");
    const head = h("header", { class: "turn-head" }, h("span", { class: "where", text: where }), badge(turn));
    if (figureName && onShow) head.append(h("button", { type: "button", class: "show-ecg", "data-figure": figureName, text: "show on ECG", onclick: () => onShow(figureName) }));
    const parts = [head];
    if (turn.prompt) parts.push(h("div", { class: "bubble q" }, h("div", { class: "who", text: "examiner" }), h("pre", { class: "prompt", text: turn.prompt })));
    if (asked) {
      const answer = h("div", { class: "bubble a" }, h("div", { class: "who", text: "model" }),
        h("pre", { class: "raw", text: turn.raw === null || turn.raw === undefined ? "(no answer)" : turn.raw }));
      if (turn.reasoning) answer.append(h("details", { class: "reasoning" }, h("summary", { text: "reasoning" }), h("pre", { text: turn.reasoning })));
      parts.push(answer);
    }
    const facts = h("dl", { class: "turn-facts" },
      fact("parsed", asked ? V.asText(turn.parsed) || "(nothing read)" : null, turn.parse_ok === false ? "bad-text" : null),
      fact("truth", V.asText(turn.answer)),
      fact("parse", turn.parse_reason),
      fact("error", turn.error, "bad-text"),
      fact("latency", turn.latency_ms !== null && turn.latency_ms !== undefined ? `${V.num(turn.latency_ms)} ms` : null),
      fact("tokens", tokensText(turn.tokens)),
      fact("attempts", turn.attempts && turn.attempts > 1 ? String(turn.attempts) : null),
      other ? fact("other run", other) : null);
    parts.push(facts);
    return h("article", { class: "turn " + cls, id: `turn-${turn.index}`, "data-index": String(turn.index) }, parts);
  };

  function spansText(spans) {
    if (!spans || !spans.length) return "none";
    return spans.map((sp) => `${V.seconds(sp.t0_ms)}-${V.seconds(sp.t1_ms)} s${sp.lead ? " (" + sp.lead + ")" : ""}`).join("; ");
  }

  /** The ECG beside the chat: one image at a time, zoomable (buttons, ctrl+wheel) and draggable. */
  V.ecgPanel = function (detail) {
    const views = detail.figures.map((f) => ({ name: f.name, url: f.url, title: f.title || (f.turn === null ? "window" : `turn #${f.turn}`), fig: f }))
      .concat(detail.assets.map((a) => ({ name: a.name, url: a.url, title: "as shown to the model", caption: a.caption })));
    const img = h("img", { id: "ecg-img", alt: "ECG", draggable: "false" });
    const viewport = h("div", { class: "ecg-view", id: "ecg-view" }, img);
    const legend = h("p", { class: "legend", id: "ecg-legend" });
    const tabs = h("div", { class: "ecg-tabs", role: "tablist" });
    let zoom = 1;
    const setZoom = (z) => {
      zoom = Math.max(0.5, Math.min(6, z));
      img.style.width = (100 * zoom).toFixed(0) + "%";
      zoomLabel.textContent = Math.round(100 * zoom) + "%";
    };
    const zoomLabel = h("span", { class: "zoom-label", id: "zoom-label", text: "100%" });
    const tools = h("div", { class: "ecg-tools" },
      h("button", { type: "button", id: "zoom-out", title: "zoom out", text: "−", onclick: () => setZoom(zoom / 1.25) }), zoomLabel,
      h("button", { type: "button", id: "zoom-in", title: "zoom in", text: "+", onclick: () => setZoom(zoom * 1.25) }),
      h("button", { type: "button", id: "zoom-fit", text: "fit", onclick: () => setZoom(1) }),
      h("button", { type: "button", id: "zoom-1to1", text: "1:1", onclick: () => img.naturalWidth && setZoom(img.naturalWidth / viewport.clientWidth) }));
    viewport.addEventListener("wheel", (ev) => {
      if (!ev.ctrlKey) return;
      ev.preventDefault();
      setZoom(zoom * (ev.deltaY < 0 ? 1.15 : 1 / 1.15));
    }, { passive: false });
    let drag = null;
    viewport.addEventListener("pointerdown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, l: viewport.scrollLeft, t: viewport.scrollTop }; viewport.setPointerCapture(ev.pointerId); });
    viewport.addEventListener("pointermove", (ev) => { if (drag) { viewport.scrollLeft = drag.l - (ev.clientX - drag.x); viewport.scrollTop = drag.t - (ev.clientY - drag.y); } });
    viewport.addEventListener("pointerup", () => { drag = null; });
    img.addEventListener("error", () => { legend.textContent = "no figure could be drawn for this view (the record and the item's image are both unavailable)"; });

    function show(name) {
      const view = views.find((v) => v.name === name) || views[0];
      if (!view) return;
      for (const b of tabs.children) b.setAttribute("aria-selected", b.dataset.name === view.name ? "true" : "false");
      img.src = view.url;
      img.alt = "ECG: " + view.title;
      V.clear(legend);
      if (view.fig) {
        legend.append(h("span", { class: "legend-true", text: "green: true evidence " }), spansText(view.fig.true), " · ",
          h("span", { class: "legend-model", text: "blue hatched: model's choice " }), spansText(view.fig.chosen), " · leads labelled at the left");
      } else {
        legend.append(view.caption || "");
      }
    }
    for (const v of views) tabs.append(h("button", { type: "button", role: "tab", class: "tab", "data-name": v.name, text: v.title, onclick: () => show(v.name) }));
    const panel = h("aside", { class: "ecg", id: "ecg" }, tabs, tools, viewport, legend);
    if (!views.length) panel.append(h("p", { class: "note", text: "No ECG for this sample: the run's dataset (window, record) is not available." }));
    else show(views[0].name);
    return { panel, show };
  };

  function counterfactualView(detail) {
    const cf = detail.counterfactual;
    if (!cf) return null;
    const original = detail.figures.find((f) => f.name === "window") || detail.figures.find((f) => f.name !== "cf");
    const shaded = detail.figures.find((f) => f.name === "cf");  // drawn from the edited window, the edited spans green
    const editedUrl = shaded ? shaded.url : cf.url;
    const box = h("section", { class: "counterfactual", id: "counterfactual" }, h("h3", { text: "Counterfactual pair" }),
      h("p", { class: "note", text: cf.description || "edited strip" }),
      h("figure", { class: "cf-original" }, original ? h("img", { src: original.url, alt: "original ECG", loading: "lazy" }) : h("p", { text: "(original figure unavailable)" }),
        h("figcaption", { text: "original" })),
      h("figure", { class: "cf-edited" }, editedUrl ? h("img", { src: editedUrl, alt: "edited ECG", loading: "lazy" }) : h("p", { text: `(edited strip not found: ${cf.image || "no path"})` }),
        h("figcaption", { text: (shaded ? "edited (green: where the edit changed the signal): " : "edited: ") + (cf.description || "") })));
    if (cf.turns && cf.turns.length) {
      V.add(box, h("h4", { text: "Answers on the edited strip" }), cf.turns.map((t) => V.turnView(t)));
    }
    return box;
  }

  function judgeView(judge) {
    if (!judge) return null;
    return h("section", { class: "judge" }, h("h3", { text: `Judge ${judge.judge || ""} (${judge.rubric || ""})` }),
      h("p", { text: `score ${V.asText(judge.score)} · ${V.asText(judge.band)}${judge.reason ? " · " + judge.reason : ""}` }),
      judge.rationale ? h("pre", { text: judge.rationale }) : null);
  }

  function navBar(ctx, index, id) {
    const params = ctx.params;
    const list = V.filterSamples(index, params, ctx.texts);
    const at = list.findIndex((r) => r.id === id);
    const keep = V.filterParams(params);
    const to = (row) => { const p = new URLSearchParams(keep); p.set("run", String(ctx.run)); if (ctx.compare) p.set("compare", ctx.compare.join(",")); p.set("sample", row.id); return p; };
    const back = new URLSearchParams(keep);
    back.set("run", String(ctx.run));
    if (ctx.compare) back.set("compare", ctx.compare.join(",")); else back.set("view", "samples");
    return h("nav", { class: "sample-nav" }, V.link(back, ctx.compare ? "‹ comparison" : "‹ samples", { id: "back" }),
      at > 0 ? V.link(to(list[at - 1]), "previous", { id: "prev-sample" }) : null,
      at >= 0 ? h("span", { text: ` ${at + 1} of ${list.length} ` }) : null,
      at >= 0 && at < list.length - 1 ? V.link(to(list[at + 1]), "next", { id: "next-sample" }) : null);
  }

  async function detailOf(run, id) {
    const index = await V.index(run);
    const row = index.byId.get(id);
    return row ? { index, detail: await V.load(`r${run}/s/${row.key}`) } : { index, detail: null };
  }

  V.views.sample = async function (root, ctx) {
    const id = ctx.params.get("sample");
    if (ctx.params.get("q")) ctx.texts = await V.searchTexts(ctx.run);
    if (ctx.compare) return V.views.pair(root, ctx, id);
    const { index, detail } = await detailOf(ctx.run, id);
    if (!detail) {
      V.add(root, h("p", { class: "warn", text: `No sample ${id} in this run.` }));
      return;
    }
    V.add(root, navBar(ctx, index, id), h("h2", { text: `Sample ${detail.id}` }),
      h("p", { class: "facts-line" }, detail.facts.map(([k, v]) => h("span", { class: "fact" }, h("b", { text: k + ": " }), v))));
    if (detail.options && detail.options.length) {
      V.add(root, h("p", { class: "note" }, "options: ", detail.options.map((o) => h("code", { text: o }))));
    }
    const ecg = V.ecgPanel(detail);
    if (detail.figures_not_exported) {
      ecg.panel.append(h("p", { class: "note", id: "figures-not-exported",
        text: `${detail.figures_not_exported} figure(s) of this sample are not in this static export (ecgtrace view --static --max-images).` }));
    }
    const figureOf = (turn) => (detail.figures.find((f) => f.turn === turn.index) || (turn.stage === "grounding" && detail.figures[0]) || {}).name;
    const chat = h("div", { class: "chat", id: "chat" }, detail.turns.map((t) => V.turnView(t, { onShow: ecg.show, figureName: figureOf(t) })));
    V.add(root, h("div", { class: "sample-grid" }, chat, ecg.panel), counterfactualView(detail), judgeView(detail.judge));
  };

  function figureIn(detail, turn, tag) {
    const figure = detail.figures.find((f) => f.turn === turn.index);
    return figure ? `${tag}:${figure.name}` : null;
  }

  /** The same sample of two runs, turn by turn side by side; turns that differ are marked. */
  V.views.pair = async function (root, ctx, id) {
    const [a, b] = ctx.compare;
    const [left, right] = await Promise.all([detailOf(a, id), detailOf(b, id)]);
    if (!left.detail || !right.detail) {
      V.add(root, h("p", { class: "warn", text: `Sample ${id} is not in both runs.` }));
      return;
    }
    const ctxA = Object.assign({}, ctx, { run: a });
    V.add(root, navBar(ctxA, left.index, id), h("h2", { text: `Sample ${id}: ${ctx.app.runs[a].label} vs ${ctx.app.runs[b].label}` }));
    // both runs' figures in one panel: the true span is the same, the chosen spans are each run's own
    const tagged = (detail, tag) => detail.figures.map((f) => Object.assign({}, f, { name: `${tag}:${f.name}`,
      title: `${tag} · ${f.turn === null ? "window" : "turn #" + f.turn}` }));
    const ecg = V.ecgPanel({ figures: tagged(left.detail, "A").concat(tagged(right.detail, "B")), assets: left.detail.assets });
    const turnsB = new Map(right.detail.turns.map((t) => [t.index, t]));
    const rows = left.detail.turns.map((ta) => {
      const tb = turnsB.get(ta.index);
      const differs = tb && (Boolean(ta.correct) !== Boolean(tb.correct) || V.asText(ta.parsed) !== V.asText(tb.parsed));
      return h("div", { class: "pair-row" + (differs ? " differs" : ""), "data-index": String(ta.index) },
        V.turnView(ta, { onShow: ecg.show, figureName: figureIn(left.detail, ta, "A") }),
        tb ? V.turnView(tb, { onShow: ecg.show, figureName: figureIn(right.detail, tb, "B") }) : h("p", { class: "note", text: "(no such turn in B)" }));
    });
    V.add(root, h("div", { class: "pair-head" }, h("b", { text: "A: " + ctx.app.runs[a].label }), h("b", { text: "B: " + ctx.app.runs[b].label })),
      h("div", { class: "pair", id: "pair" }, rows), h("h3", { text: "ECG (A and B: each run's chosen spans)" }), ecg.panel);
  };
})(window.ECGV);
