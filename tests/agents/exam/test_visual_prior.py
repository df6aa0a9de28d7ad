"""The visual prior of ``ecgtrace bias``: a time-range question whose decoys lie on the baseline is answered by "the span with
a QRS in it"; the audit builder's decoys now each hold a complex, so the prior falls back to chance."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

BEAT_TARGETS = ("premature_beat", "v_beat", "s_beat")


def _with_text_assets(items: list[dict], folder: Path) -> list[dict]:
    """The items with their signal-as-text asset written (what the visual prior reads; the PNG is not needed)."""
    from ecgtrace.tools.records import open_record, read_window
    from ecgtrace.tools.render import signal_to_text

    out = []
    for item in copy.deepcopy(items):
        info = open_record(item["record"]["path"], check_leads=False)
        rel = f"assets/{item['id']}.txt"
        (folder / "assets").mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(signal_to_text(read_window(info, item["window"]["t0_s"], item["window"]["t1_s"]), record=info.name))
        item["assets"] = {"image": None, "text": rel}
        out.append(item)
    return out


def _beat_questions(items: list[dict]):
    from ecgtrace.rubrics.diagnosis_schema import load_diagnoses

    graphs = load_diagnoses()
    for item in items:
        steps = item["provenance"]["params"]["path"]["steps"]
        for step, loop in zip(steps, item["loops"]):
            crit = graphs[item["diagnosis"]].criteria[step["criterion"]]
            targets = {q: r.target for r in crit.grounding if r.kind == "wave" for q in r.questions}
            for g in loop["grounding"]:
                if g["kind"] == "wave" and targets.get(g["question"]) in BEAT_TARGETS:
                    yield item, g


def test_every_option_of_a_beat_question_holds_a_qrs_and_is_as_long_as_the_answer(synth_build) -> None:
    from ecgtrace.agents.exam._visual_prior import option_range_s
    from ecgtrace.tools.measure import detect_r_peaks
    from ecgtrace.tools.records import open_record, read_window

    checked = 0
    for item, g in _beat_questions(synth_build.items):
        info = open_record(item["record"]["path"], check_leads=False)
        window = read_window(info, item["window"]["t0_s"], item["window"]["t1_s"])
        peaks = (detect_r_peaks(np.asarray(window.signal_mv, float), window.fs_hz) + window.sampfrom) / window.fs_hz
        spans = [option_range_s(o) for o in g["options"]]
        lengths = {round(b - a, 2) for a, b in spans}
        assert max(lengths) - min(lengths) <= 0.011, (item["id"], g["options"])  # two-decimal rounding only
        for a, b in spans:
            assert np.any((peaks >= a) & (peaks <= b)), (item["id"], g["options"], (a, b))
        checked += 1
    assert checked >= 8


def _plant_baseline_decoys(items: list[dict]) -> list[dict]:
    """The old shortcut, planted: every decoy of a beat question moved onto the baseline between two beats."""
    from ecgtrace.agents.audit._questions import span_text
    from ecgtrace.agents.exam._visual_prior import option_range_s

    out = copy.deepcopy(items)
    for item, g in _beat_questions(out):
        a, b = option_range_s(g["answer"])
        length = b - a
        starts = np.arange(item["window"]["t0_s"] + 0.3, item["window"]["t1_s"] - length - 0.3, 0.05)
        options = [g["answer"]]
        for t in starts:
            span = (float(t), float(t) + length)
            if any(abs(span[0] - option_range_s(o)[0]) < 1.0 for o in options):
                continue
            options.append(span_text(*span))
            if len(options) == len(g["options"]):
                break
        g["options"] = sorted(options, key=lambda o: option_range_s(o)[0])
    return out


def test_the_visual_prior_flags_baseline_decoys_and_not_the_builders(synth_build, tmp_path: Path) -> None:
    from ecgtrace.agents.exam._visual_prior import option_range_s
    from ecgtrace.agents.exam.bias import probe
    from ecgtrace.jsonio import write_jsonl_atomic
    from ecgtrace.tools.measure import detect_r_peaks
    from ecgtrace.tools.render import parse_signal_text

    waves = [it for it in synth_build.items if any(g["kind"] == "wave" for lp in it["loops"] for g in lp["grounding"])]
    items = _with_text_assets(waves, tmp_path / "built")
    write_jsonl_atomic(tmp_path / "built" / "audit.jsonl", items)
    planted = _plant_baseline_decoys(items)
    # keep only the planted decoys that really hold no R peak (the planting is blind to where the beats are)
    for item, g in _beat_questions(planted):
        parsed = parse_signal_text((tmp_path / "built" / item["assets"]["text"]).read_text())
        peaks = parsed.times_s[detect_r_peaks(parsed.signal_mv, parsed.fs_hz)]
        g["options"] = [o for o in g["options"] if o == g["answer"] or not np.any((peaks >= option_range_s(o)[0]) & (peaks <= option_range_s(o)[1]))]
    planted = [it for it in planted if all(len(g["options"]) >= 2 for lp in it["loops"] for g in lp["grounding"])]
    folder = tmp_path / "planted"
    (folder / "assets").mkdir(parents=True)
    for item in planted:
        (folder / item["assets"]["text"]).write_text((tmp_path / "built" / item["assets"]["text"]).read_text())
    write_jsonl_atomic(folder / "audit.jsonl", planted)

    def wave_group(path: Path) -> dict:
        result = probe(path)
        return next(g for g in result["groups"] if g["source"] == "audit" and g["by"] == "task" and g["group"] == "audit:grounding:wave")

    found = wave_group(folder)
    # the wave group also holds PR, RR and run questions, which were not planted: 0.81 measured
    assert found["visual"]["n"] >= 8 and found["visual"]["accuracy"] >= 0.7 and "visual" in found["flags"], found["visual"]
    clean = wave_group(tmp_path / "built")
    assert clean["visual"]["n"] >= 8 and "visual" not in clean["flags"], clean["visual"]
    assert clean["visual"]["accuracy"] <= clean["visual"]["chance"] + 0.15, clean["visual"]


def test_visual_choice_scores_spans_and_time_sets() -> None:
    from ecgtrace.agents.exam._visual_prior import is_time_option, option_score, visual_choice

    peaks = np.array([1.0, 2.0, 3.0])
    assert option_score("[0.95s - 1.05s]", peaks) == 1.0 and option_score("[1.40s - 1.60s]", peaks) == 0.0
    assert option_score("1000 ms, 2500 ms", peaks) == 0.5 and option_score("none", peaks) == 0.0
    assert not is_time_option("[200-220] ms") and is_time_option("1200 ms, 5400 ms")
    q = {"id": "x", "options": ["[0.40s - 0.60s]", "[1.90s - 2.10s]", "[2.40s - 2.60s]"], "answer": "[1.90s - 2.10s]", "multi": False}
    assert visual_choice(q, tuple(peaks)) == "[1.90s - 2.10s]"
    assert visual_choice({**q, "options": ["[200-220] ms", "[220-240] ms"]}, tuple(peaks)) is None
    with pytest.raises(KeyError):
        visual_choice({"options": q["options"], "answer": q["answer"]}, tuple(peaks))  # a question needs its id (seeded ties)


def test_bias_command_prints_the_visual_prior(synth_build, tmp_path: Path, capsys) -> None:
    from ecgtrace.cli import main
    from ecgtrace.jsonio import write_jsonl_atomic

    items = _with_text_assets([it for it in synth_build.items if it["diagnosis"] in ("pvc", "pac")], tmp_path)
    write_jsonl_atomic(tmp_path / "audit.jsonl", items)
    assert main(["bias", str(tmp_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    wave = next(g for g in result["groups"] if g["group"] == "audit:grounding:wave")
    assert wave["visual"]["n"] >= 1 and wave["visual"]["chance"] is not None
