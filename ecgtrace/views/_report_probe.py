"""The probe run's part of the HTML report: paired metrics with chance, the probe set's counts, and every pair.

Each kept pair shows the original strip above the edited one (both drawn from
the probe set's window files with :func:`ecgtrace.tools.render.render_png`,
the spans the edit changed shaded green on the edited strip), then every
paired turn: the question, the truth and the model's answer on each window,
what the answer should have done and whether it did. Every text is escaped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ecgtrace.views._report_tables import e, fmt_prop, table

PX_PER_MM = 4
METRICS = (("sensitivity", "sensitivity"), ("grounded_accuracy", "grounded accuracy"), ("localization_follow", "localization follow"),
           ("invariance", "invariance"), ("stability", "stability"))
LEGEND = ("Sensitivity: the answer changes when the evidence is removed or an opposite window is shown with the same question and options. "
          "Grounded accuracy: right on the original and on its counterfactual. Localization follow: the span chosen on the edited window is the "
          "moved event's new one. Invariance: after a control edit (a normal beat replaced by another) the answer stays. Stability: answers "
          "whose truth did not change stay. Chance: a uniform random answerer. An examinee that never reads the ECG scores 0% sensitivity.")


def _metric(block: dict[str, Any], key: str) -> str:
    m = block.get(key) or {}
    if m.get("value") is None:
        return "&ndash;"
    chance = f" <span class=n>chance {100 * m['chance']:.1f}%</span>" if m.get("chance") is not None else ""
    return fmt_prop(m) + chance


def probe_tables(results: dict[str, Any]) -> str:
    """Metric tables (overall and per kind, source, stage, group) and the probe set's kept/dropped counts."""
    heads = ["", "pairs", *(h for _, h in METRICS), "acc. original", "acc. counterfactual", "McNemar p"]

    def rows(blocks: list[tuple[str, dict[str, Any]]]) -> list[list[str]]:
        return [[e(name), e(b["n_pairs"]), *(_metric(b, k) for k, _ in METRICS), fmt_prop(b["accuracy_original"]), fmt_prop(b["accuracy_counterfactual"]),
                 e(f"{b['mcnemar']['p_value']:.3g}")] for name, b in blocks]

    parts = ["<h2 id=summary>Counterfactual probes</h2>", f"<p class=meta>{e(LEGEND)}</p>",
             table(["kind", *heads[1:]], rows([*results["per_kind"].items(), ("overall", results["overall"])]), caption="by counterfactual kind")]
    for key, caption in (("per_source", "by source"), ("per_stage", "by stage / QA task"), ("per_group", "by diagnosis / QA task")):
        if results.get(key):
            parts.append(table([caption.split()[1], *heads[1:]], rows(list(results[key].items())), caption=caption))
    counts = (results.get("probe_set") or {}).get("counts") or {}
    count_rows = [[e(source), e(kind), e(c["kept"]), e(c["dropped"]), e(c.get("not_applicable", 0)),
                   e("; ".join(f"{r}: {n}" for r, n in c["reasons"].items()) or "-")]
                  for source, kinds in counts.items() for kind, c in kinds.items()]
    if count_rows:
        parts.append(table(["source", "kind", "kept", "dropped", "not applicable", "why dropped"], count_rows, caption="the counterfactual set"))
    return "".join(parts)


def strip_png(root: Path, rel: str | None, spans_ms: list[list[float]], px_per_mm: int = PX_PER_MM) -> bytes | None:
    """The PNG of a probe-set window file (``rel`` inside ``root``) with ``spans_ms`` shaded green; None when unreadable.

    The one drawing of a pair's strips: the report inlines it, the viewer serves it.
    """
    from ecgtrace.tools.counterfactual import CounterfactualError, load_window
    from ecgtrace.tools.render import render_png

    if not rel:
        return None
    try:
        from ecgtrace.jsonio import safe_join

        window, _ = load_window(safe_join(root, rel))
    except (CounterfactualError, Exception):  # noqa: BLE001 - a missing file costs only its figure
        return None
    return render_png(window, highlight_spans_ms=[(a, b) for a, b in spans_ms], px_per_mm=px_per_mm).png


def _strip(root: Path, rel: str | None, spans_ms: list[list[float]]) -> str:
    from ecgtrace.views._report_images import compact_png, data_uri

    if not rel:
        return ""
    png = strip_png(root, rel, spans_ms)
    if png is None:
        return "<p class=meta>(window file not readable)</p>"
    return f"<img src=\"{e(data_uri(compact_png(png)))}\" alt=\"ECG strip\">"


def paired_turns(pair: dict[str, Any], o_row: dict[str, Any] | None, c_row: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every turn pair of ``pair`` with both answers and whether the answer did what it should (``met``: None when not both run).

    ``o_row``/``c_row``: the probe run's rows (:class:`~ecgtrace.contracts.ProbeSample`) of the original and the counterfactual.
    """
    from ecgtrace.agents.probe.metrics import _turn

    out = []
    for tp in pair["turns"]:
        o_t = _turn(o_row, tp["original"]) if o_row else None
        c_t = _turn(c_row, tp["counterfactual"]) if c_row else None
        got_o, got_c = _answer(o_t), _answer(c_t)
        met = {"change": got_o != got_c, "same": got_o == got_c, "follow": bool(c_t and c_t.get("correct"))}[tp["expect"]] if o_t and c_t else None
        out.append({"pair": tp, "original": o_t, "counterfactual": c_t, "got_original": got_o, "got_counterfactual": got_c, "met": met})
    return out


def _answer(turn: dict[str, Any] | None) -> str:
    if turn is None:
        return "(not run)"
    if not turn.get("asked", True):
        return "(not asked)"
    value = turn.get("parsed") if turn.get("parse_ok") else "(unparsed)"
    return ", ".join(value) if isinstance(value, list) else str(value)


def _pair_html(i: int, pair: dict[str, Any], rows: dict[str, dict[str, Any]], questions: dict[tuple[str, int], str], root: Path,
               draw: bool, open_: bool) -> str:
    o_row, c_row = rows.get(pair["original"]), rows.get(pair["id"])
    edit = pair.get("edit") or {}
    what = edit.get("meant") or edit.get("op") or pair["kind"]
    head = f"{pair['id']} · {pair['kind']} · {pair['group']} · {what}"
    body = [f"<p class=meta>truth before: <code>{e(json.dumps(pair.get('before'), sort_keys=True))}</code> &middot; after: "
            f"<code>{e(json.dumps(pair.get('after'), sort_keys=True))}</code> &middot; edited spans (ms): <code>{e(edit.get('spans_ms'))}</code></p>"]
    if draw:
        files = pair.get("files") or {}
        body.append(f"<figure>{_strip(root, files.get('original_window'), [])}<figcaption>original</figcaption></figure>"
                    f"<figure>{_strip(root, files.get('window'), edit.get('spans_ms') or [])}"
                    f"<figcaption><span class=legend-true>green: where the edit changed the signal</span> &middot; {e(what)}</figcaption></figure>")
    trs = []
    for done in paired_turns(pair, o_row, c_row):
        tp, got_o, got_c, met = done["pair"], done["got_original"], done["got_counterfactual"], done["met"]
        badge = "<span class='badge na'>n/a</span>" if met is None else f"<span class='badge {'ok' if met else 'bad'}'>{'yes' if met else 'no'}</span>"
        question = questions.get((pair["original"], tp["original"]), "")
        trs.append([e(tp["stage"] + (f":{tp['kind']}" if tp.get("kind") and tp["stage"] == "grounding" else "")), e(question),
                    e(_fmt(tp["original_answer"])) + " &rarr; " + e(_fmt(tp["counterfactual_answer"])), e(got_o) + " &rarr; " + e(got_c),
                    e(tp["expect"]), badge])
    body.append(table(["turn", "question", "truth: original &rarr; edited".replace("&rarr;", "->"), "model: original -> edited", "should", "did"],
                      trs, cls="metrics"))
    return f"<details class=sample id=p{i}{' open' if open_ else ''}><summary>{e(head)}</summary>{''.join(body)}</details>"


def _fmt(value: Any) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


def probe_samples(results: dict[str, Any], rows: list[dict[str, Any]], max_images: int, open_samples: int) -> list[str]:
    """One section per kept pair (two strips each, for the first ``max_images // 2`` pairs)."""
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.graphs.probe_runner import load_probe_set

    root = Path((results.get("probe_set") or {}).get("path") or "")
    try:
        probe = load_probe_set(root)
    except (EcgTraceError, OSError, ValueError):
        return [f"<p class=meta>(the probe set at {e(root)} cannot be read: pairs are not shown)</p>"]
    from ecgtrace.agents.audit.examiner import plan_turns

    questions = {(it.id, t["index"]): t["question"] for it in probe.audit for t in plan_turns(it)}
    questions.update({(it.id, 0): it.question for it in probe.qa})
    by_id = {r["id"]: r for r in rows}
    kept = [p for p in probe.pairs if p["status"] == "kept" and (p["id"] in by_id or p["original"] in by_id)]
    return [f"<h2 id=pairs>Pairs ({len(kept)})</h2>"] + [
        _pair_html(i, p, by_id, questions, root, 2 * i < max_images, i < open_samples) for i, p in enumerate(kept)]
