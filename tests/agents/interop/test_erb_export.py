"""``ecgtrace export erb``: runs in ERB's result layout, scored by an independent reimplementation of ERB's metrics.

``erb_scores`` below is written from ``../shared/formats/ERB.md`` alone (it shares no code
with ``ecgtrace.metrics``): it reads the exported files and computes IDA, GT-RDA,
Completion, Depth and the per-stage accuracies "with ground truth" the way ERB's
evaluator does. The exported run's own ``results.json`` must agree to 6 decimals.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from ecgtrace.agents.audit.format import load_audit
from ecgtrace.agents.exam.examinees import Examinee, Reply
from ecgtrace.agents.interop._erb_samples import ERB_DIAGNOSES
from ecgtrace.cli import main
from ecgtrace.graphs.audit_runner import run_audit
from ecgtrace.runlog import RunDir

ROOT = Path(__file__).resolve().parents[3]
FURTHER = "Further findings are required to confirm the diagnosis"


# ------------------------------------------------------------------ ERB's metrics, from ERB.md


def erb_correct(reply: Any, answer: Any, options: list[str]) -> bool:
    """ERB's heuristic scorer: the reply against the option text; a bare letter is wrong; "no..." counts as "No"."""
    if not isinstance(reply, str):
        return False
    text = reply.strip()
    if isinstance(answer, list):
        return {part.strip() for part in text.split(",") if part.strip()} == set(answer)
    if set(options) >= {"Yes", "No"} and text.lower().startswith("no") and not text.lower().startswith("no finding"):
        text = "No"
    return text == answer


def erb_scores(model_dir: Path) -> dict[str, dict[str, float]]:
    """{"total" | target_dx: {ida, gt_rda, completion, depth, criterion, finding, lead, wave, measurement, decision}}."""
    tallies: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(model_dir.glob("*/*/*.json")):
        sample = json.loads(path.read_text())
        data = sample["data"]
        initial = data["initial_diagnostic_question"]
        loops = data["reasoning"] if "reasoning" in data else data["path_1"]
        groups = [tallies["total"], tallies[sample["metadata"]["target_dx"]]]
        ida = erb_correct(initial["model_response"], initial["answer"], initial["options"])
        complete, last_ok = True, False
        stage_hits: list[tuple[str, bool]] = []
        depths: list[float] = []
        for k, loop in enumerate(loops):
            steps = list(loop.items())  # ERB walks a loop's steps in file order
            (crit_key, crit), (find_key, find), (ground_key, grounding), (dec_key, dec) = steps
            assert crit_key == "criterion_selection" and ground_key in ("grounding", "ecg_grounding")
            crit_ok = erb_correct(crit["model_response"], crit["answer"], crit["options"])
            find_ok = erb_correct(find["model_response"], find["answer"], find["options"])
            ground_ok = [erb_correct(g["model_response"], g["answer"], g["options"]) for g in grounding]
            dec_ok = erb_correct(dec["model_response"], dec["answer"], dec["options"])
            stage_hits += [("criterion", crit_ok), ("finding", find_ok), ("decision", dec_ok)]
            stage_hits += [(g["question_type"].removesuffix("_grounding"), ok) for g, ok in zip(grounding, ground_ok)]
            complete = complete and crit_ok and find_ok and all(ground_ok) and dec_ok
            if k == len(loops) - 1:
                last_ok = dec_ok
            if grounding:
                depth = 0.0
                if crit_ok:
                    depth = 1.0
                    if find_ok:
                        before = next((i for i, ok in enumerate(ground_ok) if not ok), len(ground_ok))
                        depth = 2.0 + before / len(ground_ok)
                        if before == len(ground_ok) and dec_ok:
                            depth += 1.0
                depths.append(depth)
        for group in groups:
            group["ida"].append(float(ida))
            group["gt_rda"].append(float(last_ok))
            group["completion"].append(float(complete))
            group["depth"].extend(depths)
            for stage, ok in stage_hits:
                group[stage].append(float(ok))
    return {name: {key: round(sum(v) / len(v), 6) for key, v in tally.items() if v} for name, tally in tallies.items()}


def results_scores(block: dict[str, Any]) -> dict[str, float]:
    out = {key: block[key]["value"] for key in ("ida", "gt_rda", "completion", "depth") if block[key]["value"] is not None}
    names = {"criterion": "criterion", "finding": "finding", "decision": "decision", "grounding:lead": "lead",
             "grounding:wave": "wave", "grounding:measurement": "measurement"}
    out.update({names[k]: v["value"] for k, v in block["stages"].items() if k in names})
    return out


# ------------------------------------------------------------------ examinees


class Sometimes(Examinee):
    """Right with probability ``p`` per turn (seeded by sample and turn), else a wrong option; answers in option text."""

    def __init__(self, p: float, seed: int = 0) -> None:
        self.p, self.seed = p, seed

    async def answer(self, messages, turn):
        key = f"{self.seed}:{turn['sample_id']}:{turn['index']}".encode()
        rng = random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))
        answer = turn["answer"]
        if rng.random() < self.p:
            return Reply(raw=", ".join(answer) if isinstance(answer, list) else answer)
        wrong = [o for o in turn["options"] if o not in (answer if isinstance(answer, list) else [answer])]
        return Reply(raw=rng.choice(wrong) if wrong else turn["options"][0])


class AlwaysFurther(Examinee):
    """Right everywhere except decisions, where it always answers "Further findings ..."."""

    async def answer(self, messages, turn):
        if turn["stage"] == "decision":
            return Reply(raw=FURTHER)
        return Reply(raw=", ".join(turn["answer"]) if turn["multi"] else turn["answer"])


class MissOneGrounding(Examinee):
    """Right on every turn except the first grounding question of each loop."""

    async def answer(self, messages, turn):
        answer = turn["answer"]
        if turn["stage"] == "grounding" and _first_grounding(turn):
            if turn["multi"]:  # another set: one lead where the answer is every lead, else every lead
                return Reply(raw=turn["options"][0] if set(answer) == set(turn["options"]) else ", ".join(turn["options"]))
            return Reply(raw=next(o for o in turn["options"] if o != answer))
        return Reply(raw=", ".join(answer) if turn["multi"] else answer)


def _first_grounding(turn) -> bool:
    return turn["index"] in FIRST_GROUNDING.get(turn["sample_id"], set())


FIRST_GROUNDING: dict[str, set[int]] = {}


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def dataset(erb_records, erb_fixtures, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("erb_export") / "dataset"
    assert main(["import", "erb", str(erb_fixtures / "ptbxl_new.jsonl"), "--records", str(erb_records["ptbxl"]), "--records",
                 str(erb_records["mimic"]), "--out", str(out), "--modalities", "text"]) == 0
    return out


def audit(dataset: Path, run: Path, examinee: Examinee, **kwargs) -> dict[str, Any]:
    audit_set = load_audit(dataset)
    run_dir = RunDir.open(run, {"dataset_sha256": audit_set.sha256}, {"dataset_path": str(audit_set.path)}, kind="audit")
    results = asyncio.run(run_audit(audit_set, run_dir, examinee, modality="text", **kwargs))
    return results


def test_exported_run_scored_by_erb_definitions_matches_results_json(dataset, tmp_path):
    results = audit(dataset, tmp_path / "run", Sometimes(0.75, seed=5), prompt_style="erb")
    for keys in ("old", "new"):
        out = tmp_path / f"export-{keys}"
        assert main(["export", "erb", str(tmp_path / "run"), "--out", str(out), "--keys", keys, "--model-name", "m"]) == 0
        scores = erb_scores(out / "m")
        assert scores["total"] == results_scores(results["overall"]), keys
        for target_dx, block in scores.items():
            if target_dx != "total":
                assert block == results_scores(results["per_diagnosis"][ERB_DIAGNOSES[target_dx]]), (keys, target_dx)
    overall = results["overall"]
    assert 0 < overall["depth"]["value"] < 4 and 0 < overall["gt_rda"]["value"] < 1  # a run that tells the metrics apart


def test_export_layout_keys_and_model_responses(dataset, tmp_path):
    audit(dataset, tmp_path / "run", Sometimes(0.5, seed=1))
    assert main(["export", "erb", str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--model-name", "my model"]) == 0
    model_dir = tmp_path / "out" / "my-model"
    files = sorted(p.relative_to(model_dir).as_posix() for p in model_dir.glob("*/*/*.json"))
    assert "ptbxl/left_ventricular_hypertrophy/3.json" in files and "mimic_iv_ecg/right_ventricular_hypertrophy/12.json" in files
    assert len(files) == 10
    old = json.loads((model_dir / "ptbxl/first_degree_av_block/1.json").read_text())
    source = json.loads((ROOT / "tests/fixtures/erb/ptbxl_new.jsonl").read_text().splitlines()[1])
    assert old["metadata"] == source["metadata"]
    loop = old["data"]["path_1"][1]
    assert list(loop) == ["criterion_selection", "finding", "grounding", "decision"]
    assert loop["finding"]["question_type"] == "finding" and loop["decision"]["question_type"] == "decision"
    assert loop["grounding"][1]["answer"] == "Above 240ms" and loop["grounding"][1]["answer_idx"] == 4  # plain values in the old files
    assert old["data"]["initial_diagnostic_question"]["eval_path"] == 1
    from ecgtrace.runlog import load_run_samples

    row = next(r for r in load_run_samples(tmp_path / "run")[1] if r["id"] == "erb-ptbxl-first_degree_av_block-1")
    said = [t["raw"] for t in row["turns"]]
    got = [old["data"]["initial_diagnostic_question"]["model_response"]]
    for lp in old["data"]["path_1"]:
        got += [lp["criterion_selection"]["model_response"], lp["finding"]["model_response"],
                *(g["model_response"] for g in lp["grounding"]), lp["decision"]["model_response"]]
    assert got == said
    manifest = json.loads((tmp_path / "out" / "my-model.ecgtrace.json").read_text())
    assert manifest["n_files"] == 10 and "window (ERB always shows the whole record)" in manifest["not_carried"]
    assert all(entry["window"] is not None for entry in manifest["files"])

    assert main(["export", "erb", str(tmp_path / "run"), "--out", str(tmp_path / "new"), "--keys", "new", "--model-name", "m"]) == 0
    new = json.loads((tmp_path / "new" / "m" / "ptbxl/first_degree_av_block/1.json").read_text())
    loop = new["data"]["reasoning"][1]
    assert list(loop) == ["criterion_selection", "finding_identification", "ecg_grounding", "diagnostic_decision"]
    assert loop["ecg_grounding"][1]["answer"] == ["Above 240ms"] and loop["ecg_grounding"][1]["answer_idx"] == [4]
    assert {k: v for k, v in new["data"].items() if k != "reasoning"}.keys() == {"initial_diagnostic_question"}


def test_items_not_from_erb_are_exported_with_their_own_ids(tmp_path):
    shutil.copy(ROOT / "tests" / "fixtures" / "audit_small.jsonl", tmp_path / "audit.jsonl")
    shutil.copytree(ROOT / "tests" / "fixtures" / "assets", tmp_path / "assets")
    results = audit(tmp_path, tmp_path / "run", Sometimes(0.6, seed=2))
    assert main(["export", "erb", str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--model-name", "m"]) == 0
    files = sorted(p.relative_to(tmp_path / "out" / "m").as_posix() for p in (tmp_path / "out" / "m").glob("*/*/*.json"))
    assert files[0].startswith("ecgtrace-synthetic/") and any(f.endswith("/af-pos-001.json") for f in files)
    first = json.loads((tmp_path / "out" / "m" / files[0]).read_text())
    assert first["metadata"]["data_source"] == "ecgtrace-synthetic" and first["metadata"]["ecg_id"] == "holter"
    assert erb_scores(tmp_path / "out" / "m")["total"] == results_scores(results["overall"])


def test_export_refuses_a_changed_dataset_and_a_qa_run(dataset, tmp_path, capsys):
    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    audit(copy, tmp_path / "run", Sometimes(1.0))
    with open(copy / "audit.jsonl", "a") as handle:
        handle.write("\n")
    assert main(["export", "erb", str(tmp_path / "run"), "--out", str(tmp_path / "out")]) != 0
    assert "has changed since the run" in capsys.readouterr().err
    assert main(["export", "erb", str(tmp_path / "run"), "--out", str(tmp_path / "run" / "inside")]) != 0
    assert "inside the run folder" in capsys.readouterr().err


# ------------------------------------------------------------------ the two examinees the issue names


def test_always_further_scores_no_gt_rda_and_the_share_of_further_as_decision_accuracy(dataset, tmp_path):
    items = load_audit(dataset).items
    decisions = [loop.decision.answer for it in items for loop in it.loops]
    # hand count over the 10 imported samples: 17 decision turns, 7 of them "Further findings ..." (every loop but the last)
    assert (len(decisions), decisions.count(FURTHER)) == (17, 7)
    overall = audit(dataset, tmp_path / "run", AlwaysFurther(), prompt_style="erb")["overall"]
    assert overall["gt_rda"]["value"] == 0.0 and overall["gt_rda"]["n"] == 10
    assert (overall["decision_acc"]["k"], overall["decision_acc"]["n"]) == (7, 17)
    assert overall["ida"]["value"] == 1.0 and overall["completion"]["value"] == 0.0


def test_one_wrong_grounding_answer_per_loop(dataset, tmp_path):
    from ecgtrace.agents.audit.examiner import plan_turns

    items = load_audit(dataset).items
    for it in items:
        firsts: dict[int, int] = {}
        for t in plan_turns(it):
            if t["stage"] == "grounding":
                firsts.setdefault(t["loop"], t["index"])
        FIRST_GROUNDING[it.id] = set(firsts.values())
    loops = [len(loop.grounding) for it in items for loop in it.loops]
    # hand count over the 10 samples' loops: 17 loops, 13 with grounding, 17 grounding questions in all
    assert (len(loops), sum(1 for g in loops if g), sum(loops)) == (17, 13, 17)
    overall = audit(dataset, tmp_path / "run", MissOneGrounding())["overall"]
    assert overall["ida"]["value"] == 1.0 and overall["gt_rda"]["value"] == 1.0 and overall["decision_acc"]["value"] == 1.0
    assert overall["completion"]["value"] == 0.0  # every sample has a loop with grounding
    assert overall["depth"]["value"] == 2.0 and overall["depth"]["n"] == 13  # criterion + finding, then nothing before the wrong one
    assert (overall["stages"]["grounding"]["k"], overall["stages"]["grounding"]["n"]) == (4, 17)


def test_a_report_of_an_erb_run_names_erb_leads_by_the_records_own_names(dataset, tmp_path):
    from ecgtrace.views._report_images import audit_turn_spans
    from ecgtrace.views.report_html import render_html

    audit(dataset, tmp_path / "run", Sometimes(0.5, seed=4), prompt_style="erb")
    html = render_html(tmp_path / "run", max_images=2)
    assert "Decision acc." in html and "Lead V5" in html and "[6th QRS wave - 7th QRS wave]" in html
    item = {"window": {"t0_s": 0.0, "t1_s": 10.0}, "record": {"leads": ["I", "II", "III", "AVR", "AVL", "AVF", "V1"]}}
    true, model = audit_turn_spans({"kind": "lead", "answer": ["Lead aVL", "Lead V1"], "parsed": ["Lead aVL"], "parse_ok": True}, item)
    assert [s["lead"] for s in true] == ["AVL", "V1"] and [s["lead"] for s in model] == ["AVL"]
