"""What the viewer and the report plot: chance and prior levels, plot specs, tokens and cost, the sample index, SVG, payloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ecgtrace.views.levels import prior_correct, reference_levels
from ecgtrace.views.plots import qa_errors, run_plots
from ecgtrace.views.run_view import RunView, open_run, sample_key
from ecgtrace.views.svg import heat_class, plot_svg
from ecgtrace.views.usage import run_usage
from ecgtrace.views.viewer_data import app_data, headline_metrics, sample_index
from ecgtrace.views.viewer_sample import compare_data, figure_specs, sample_detail
from ecgtrace.views.viewer_site import js_payload
from tests.support.viewer_runs import PAYLOAD


@pytest.fixture(scope="module")
def runs(viewer_runs: dict[str, Path]) -> dict[str, RunView]:
    return {name: open_run(viewer_runs[name]) for name in ("a", "b", "prior", "qa")}


def _index_rows(run: RunView) -> dict[str, dict]:
    index = sample_index(run)
    return {row[1]: dict(zip(index["columns"], row)) for row in index["rows"]}


def test_chance_per_stage_is_one_over_the_option_count(runs: dict[str, RunView]) -> None:
    """audit_items: Yes/No questions, 5 criteria, 3 leads (multi: 7 non-empty sets), 4 wave spans, 4 bins, 3 decisions."""
    chance = reference_levels(runs["a"])["chance"]
    expected = {"initial": 1 / 2, "criterion": 1 / 5, "finding": 1 / 2, "grounding:lead": 1 / 7, "grounding:wave": 1 / 4,
                "grounding:measurement": 1 / 4, "decision": 1 / 3, "grounding": (1 / 7 + 1 / 4 + 1 / 4) / 3}
    assert chance == pytest.approx(expected, abs=1e-6)


def test_prior_level_from_a_prior_run_equals_the_rule_run_on_the_items(runs: dict[str, RunView], viewer_runs: dict[str, Path]) -> None:
    from_rule = reference_levels(runs["a"])
    from_run = reference_levels(runs["a"], [runs["b"], runs["prior"]])
    assert "prior run run_prior" in from_run["notes"]["prior"] and "rule" in from_rule["notes"]["prior"]
    assert from_run["prior"] == pytest.approx(from_rule["prior"], abs=1e-9)
    # by hand: the prior says the longest option, "Yes" to every Yes/No question
    labels = [json.loads(line)["label"] for line in viewer_runs["dataset"].read_text().splitlines()]
    assert from_rule["prior"]["initial"] == pytest.approx(sum(labels) / len(labels))
    assert from_rule["prior"]["decision"] == 0.0  # the longest decision option is "Further findings ...", never a last-loop answer here


def test_prior_correct_agrees_with_the_bias_probe(viewer_runs: dict[str, Path]) -> None:
    from ecgtrace.agents.exam.bias import collect_questions, prior_answers

    questions = collect_questions(viewer_runs["dataset"])
    assert prior_correct(questions) == prior_answers(questions)


def test_stage_bars_read_results_and_carry_both_levels(runs: dict[str, RunView]) -> None:
    plots = {p["id"]: p for p in run_plots(runs["a"], [runs["prior"]])}
    stages = runs["a"].results["overall"]["stages"]
    bars = plots["stages"]["bars"]
    assert [b["label"] for b in bars][:3] == ["initial", "criterion", "finding"]
    assert {b["label"]: b["value"] for b in bars} == {k: v["value"] for k, v in stages.items()}
    wave = next(b for b in bars if b["label"] == "grounding:wave")
    assert (wave["k"], wave["n"]) == (3, 6)  # items 1, 3, 5 right
    refs = {r["name"]: r["values"] for r in plots["stages"]["refs"]}
    assert refs["chance"][[b["label"] for b in bars].index("grounding:wave")] == pytest.approx(0.25)
    heat = plots["heatmap"]
    assert heat["rows"] == sorted({"af", "avb1", "brady"})
    af = dict(zip(heat["cols"], heat["cells"][heat["rows"].index("af")]))
    assert (af["grounding:wave"]["k"], af["grounding:wave"]["n"]) == (1, 2)  # af = items 0 (wrong) and 3 (right)
    assert sum(b["count"] for b in plots["depth"]["bins"]) == 6


def test_depth_histogram_bins_hand_made_depths(runs: dict[str, RunView]) -> None:
    """Depths per item (metrics' walk, version 2: grounding credited up to the first wrong answer): 0 wave wrong -> 2 + 1/3
    (the lead answer before it counts, the measurement after it not); 1 finding unreadable -> 1; 2, 4 -> 2 + 1/3;
    3 decision error -> 3; 5 -> 4."""
    bins = {b["label"]: b["count"] for b in next(p for p in run_plots(runs["a"]) if p["id"] == "depth")["bins"]}
    assert bins == {"0-0.5": 0, "0.5-1": 0, "1-1.5": 1, "1.5-2": 0, "2-2.5": 3, "2.5-3": 0, "3-3.5": 1, "3.5-4": 1}


def test_qa_error_distributions_by_hand() -> None:
    rows = [
        {"answer_type": "integer", "item": {}, "turns": [{"answer": "3", "parsed": 5.0, "parse_ok": True}]},
        {"answer_type": "integer", "item": {}, "turns": [{"answer": "2", "parsed": "1", "parse_ok": True}]},  # closed count option
        {"answer_type": "integer", "item": {}, "turns": [{"answer": "2", "parsed": None, "parse_ok": False}]},
        {"answer_type": "time_ms", "item": {}, "turns": [{"answer": "1500 ms", "parsed": 1400.0, "parse_ok": True}]},
        {"answer_type": "timestamps_ms", "item": {}, "turns": [{"answer": "1100 ms, 4000 ms", "parsed": [1000.0, 5000.0], "parse_ok": True}]},
        {"answer_type": "timestamps_ms", "item": {}, "turns": [{"answer": "1100 ms", "parsed": [], "parse_ok": True}]},
    ]
    counts, times, no_count, no_time = qa_errors(rows)
    assert counts == [2.0, -1.0] and no_count == 1
    assert times == [-100.0, -100.0, 1000.0] and no_time == 1


def test_qa_plots_show_task_accuracy_and_error_histograms(runs: dict[str, RunView]) -> None:
    plots = {p["id"]: p for p in run_plots(runs["qa"])}
    assert {"tasks", "scores", "count_error", "timing_error"} <= set(plots)
    per_task = runs["qa"].results["per_task"]
    assert {b["label"] for b in plots["tasks"]["bars"]} == {t for t, b in per_task.items() if b.get("accuracy")}
    refs = {r["name"] for r in plots["tasks"]["refs"]}
    assert refs == {"chance", "prior"}  # the closed tasks have options
    assert sum(b["count"] for b in plots["count_error"]["bins"]) + int(plots["count_error"]["caption"].split("; ")[1].split()[0]) == sum(
        1 for r in runs["qa"].rows if r.get("answer_type") == "integer")
    # the scripted model answers every time right: every predicted time (2 + 1 + 2 + 1) falls in the centre bin
    timing = {b["label"]: b["count"] for b in plots["timing_error"]["bins"]}
    assert timing["+-50"] == 6 and sum(timing.values()) == 6 and list(timing)[0] == "< -2000" and list(timing)[-1] == ">= 2000"


def test_tokens_and_cost_per_model(runs: dict[str, RunView]) -> None:
    """Run A: every asked turn but the failed decision reports usage; price $2 / $8 per 1M input / output tokens."""
    usage = run_usage(runs["a"].header, runs["a"].rows, runs["a"].results)
    turns = [t for r in runs["a"].rows for t in r["turns"]]
    prompt = sum(t["tokens"]["prompt_tokens"] for t in turns if t["tokens"])
    completion = sum(t["tokens"]["completion_tokens"] for t in turns if t["tokens"])
    assert usage["total"]["requests"] == len(turns) == 42 and usage["total"]["reported"] == 41
    assert (usage["total"]["prompt_tokens"], usage["total"]["completion_tokens"]) == (prompt, completion)
    assert usage["total"]["cost_usd"] == pytest.approx(prompt * 2.0 / 1e6 + completion * 8.0 / 1e6)
    assert [m["model"] for m in usage["per_model"]] == ["scripted-a"]
    assert run_usage(runs["b"].header, runs["b"].rows)["total"]["cost_usd"] is None  # no price: tokens only


def test_sample_index_by_construction(runs: dict[str, RunView]) -> None:
    rows = _index_rows(runs["a"])
    by_item = {int(k.rsplit("-", 1)[1]): v for k, v in rows.items()}
    assert [by_item[i]["first_wrong"] for i in range(6)] == ["grounding", "finding", "grounding", "decision", "grounding", None]
    assert [by_item[i]["correct"] for i in range(6)] == [False, False, False, False, False, True]
    assert [by_item[i]["parse"] for i in range(6)] == [0, 1, 0, 0, 0, 0]
    assert [by_item[i]["errors"] for i in range(6)] == [0, 0, 0, 1, 0, 0]
    assert "grounding:wave" in by_item[0]["wrong"] and by_item[5]["wrong"] == []
    assert by_item[0]["key"] == sample_key(by_item[0]["id"])


def test_headline_metrics_come_from_results_whatever_their_names(runs: dict[str, RunView]) -> None:
    results = json.loads(json.dumps(runs["a"].results))
    results["overall"]["decision_acc"] = results["overall"].pop("gt_rda")  # issue 12 renames a metric
    names = [m["key"] for m in headline_metrics(results)]
    assert "decision_acc" in names and "gt_rda" not in names and "ida" in names


def test_sample_detail_figures_and_counterfactual_extension_point(runs: dict[str, RunView], tmp_path: Path) -> None:
    run = runs["a"]
    row = run.rows[0]
    names = [f["name"] for f in figure_specs(run, row)]
    assert names[0] == "window" and len(names) == 3  # the window, the lead turn, the wave turn
    window = figure_specs(run, row)[0]
    assert len(window["true"]) == 1 and len(window["chosen"]) == 1  # item 0's wrong wave span
    (run.root.parent / "cf").mkdir(exist_ok=True)
    edited = run.root.parent / "cf" / "edited.png"
    edited.write_bytes(b"\x89PNG\r\n\x1a\n")
    row_cf = {**row, "counterfactual": {"image": "cf/edited.png", "description": "P waves removed"}}
    detail = sample_detail(run, 0, row_cf)
    assert detail["counterfactual"]["description"] == "P waves removed"
    assert detail["counterfactual"]["url"] is None  # outside the run and dataset folders: not served
    outside = {**row, "counterfactual": {"image": "../cf/edited.png"}}
    assert sample_detail(run, 0, outside)["counterfactual"]["url"] is None


def test_comparison_lists_the_turns_that_differ(runs: dict[str, RunView]) -> None:
    data = compare_data([runs["a"], runs["b"]], 0, 1)
    assert data["shared"] == 6 and not data["warnings"]
    assert data["diffs_total"] == 5  # wave of items 1, 2, 4; finding of item 1; decision of item 3
    wave = data["tests"]["stage:grounding:wave"]
    assert (wave["b"], wave["c"]) == (1, 2)  # A right and B wrong: item 1; A wrong and B right: items 2 and 4
    assert app_data([runs["a"], runs["b"], runs["qa"]])["pairs"] == [[0, 1]]


def test_svg_plots_escape_every_label() -> None:
    spec = {"type": "bars", "id": "x", "title": "<script>alert(1)</script>", "ymax": 1.0, "percent": True, "caption": "a & b",
            "bars": [{"label": PAYLOAD, "value": 0.5, "lo": 0.3, "hi": 0.7, "n": 10, "k": 5}], "refs": [{"name": "chance", "values": [0.25]}]}
    svg = plot_svg(spec)
    assert "<script" not in svg and "<img" not in svg and "&lt;img src=x" in svg and "a &amp; b" in svg
    heat = {"type": "heatmap", "id": "h", "title": "t", "caption": "", "rows": [PAYLOAD], "cols": ["</text><script>"],
            "cells": [[{"value": 0.96, "k": 24, "n": 25}]]}
    assert "<script" not in plot_svg(heat) and heat_class(0.96) == "h10" and heat_class(0.04) == "h0"


def test_js_payload_cannot_close_a_script_or_inject_markup() -> None:
    body = js_payload("r0/s/x", {"raw": "</script><script>alert(1)</script> & \u2028"}).decode("ascii")
    assert body.startswith('ECGV.receive("r0/s/x",') and body.endswith(");\n")
    assert "<" not in body and ">" not in body and "&" not in body and "\u2028" not in body
    assert json.loads(body[len('ECGV.receive("r0/s/x",'):-3])["raw"].startswith("</script>")


def test_totals_the_run_wrote_are_shown_instead_of_recounted(runs: dict[str, RunView]) -> None:
    """A results.json ``usage`` block (the run controls' totals, priced per model) wins over counting the turns."""
    results = {"usage": {"cost_usd": 0.05, "per_model": {
        "openai:big": {"roles": ["examinee"], "requests": 10, "without_usage": 2, "cost_usd": 0.04, "price_per_1m_usd": {"in": 2.5, "out": 10.0},
                       "tokens": {"prompt_tokens": 12000, "completion_tokens": 1000, "total_tokens": 13000}},
        "openai:judge": {"roles": ["judge"], "requests": 10, "without_usage": 0, "cost_usd": 0.01, "price_per_1m_usd": {"in": 1.0, "out": 2.0},
                         "tokens": {"prompt_tokens": 8000, "completion_tokens": 1000, "total_tokens": 9000}}}}}
    usage = run_usage(runs["a"].header, runs["a"].rows, results)
    assert [(m["model"], m["role"], m["reported"], m["cost_usd"]) for m in usage["per_model"]] == [
        ("openai:big", "examinee", 8, 0.04), ("openai:judge", "judge", 10, 0.01)]
    assert usage["total"]["total_tokens"] == 22000 and usage["total"]["cost_usd"] == 0.05
    assert usage["price"] is None  # two models, two prices: no single price line
