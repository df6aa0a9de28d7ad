"""``ecgtrace import erb``: ERB samples in, audit items out; malformed samples rejected with their line and reason."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from ecgtrace.agents.audit.examiner import plan_turns
from ecgtrace.agents.audit.format import load_audit
from ecgtrace.agents.exam.examinees import OracleExaminee, RandomExaminee
from ecgtrace.cli import main
from ecgtrace.graphs.audit_runner import run_audit
from ecgtrace.runlog import RunDir

#: line of tests/fixtures/erb/ptbxl_new.jsonl -> why it is rejected (the other lines, 1-9, are well formed)
REJECTED = {10: "options_repeat", 11: "answer_not_in_options", 12: "record_missing", 13: "record_missing", 14: "not_json",
            15: "duplicate_id"}
KEPT = [f"erb-ptbxl-{dx}-{i}" for i, dx in enumerate([
    "first_degree_av_block", "first_degree_av_block", "inferior_myocardial_infarction", "left_ventricular_hypertrophy",
    "second_degree_av_block", "complete_left_bundle_branch_block", "premature_ventricular_complex", "third_degree_av_block",
    "left_anterior_fascicular_block"])]


def import_erb(source: Path, roots: list[Path], out: Path, *extra: str) -> int:
    args = ["import", "erb", str(source), "--out", str(out)]
    for root in roots:
        args += ["--records", str(root)]
    return main([*args, *extra])


def rejected(out: Path) -> dict[int, str]:
    return {row["line"]: row["code"] for row in map(json.loads, (out / "rejected.jsonl").read_text().splitlines())}


@pytest.fixture(scope="module")
def imported(erb_records, erb_fixtures, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("erb_import") / "dataset"
    assert import_erb(erb_fixtures / "ptbxl_new.jsonl", [erb_records["ptbxl"]], out, "--modalities", "text") == 0
    return out


def test_keeps_every_well_formed_sample_and_rejects_the_others_with_line_and_reason(imported, capsys):
    items = load_audit(imported).items
    assert [it.id for it in items] == KEPT
    assert rejected(imported) == REJECTED
    rows = [json.loads(line) for line in (imported / "rejected.jsonl").read_text().splitlines()]
    by_line = {r["line"]: r for r in rows}
    assert by_line[10]["reason"].startswith("reasoning[0].ecg_grounding[1]: option '[8.12s - 8.22s]' appears more than once")
    assert "'[0.05mV - 0.10mV]' is not among the options" in by_line[11]["reason"]
    assert "records500/21000/21837_hr not found" in by_line[12]["reason"]
    assert "files/p1972/p19729398/s41084804/41084804 not found" in by_line[13]["reason"]
    assert "already seen at ptbxl_new.jsonl:2" in by_line[15]["reason"]
    summary = json.loads((imported / "import_summary.json").read_text())
    assert (summary["n_samples"], summary["n_items"], summary["n_rejected"]) == (15, 9, 6)
    assert summary["rejected_by_code"] == {"answer_not_in_options": 1, "duplicate_id": 1, "not_json": 1, "options_repeat": 1,
                                           "record_missing": 2}


def test_the_summary_line_counts_what_was_kept_and_rejected(erb_records, erb_fixtures, tmp_path, capsys):
    assert import_erb(erb_fixtures / "ptbxl_new.jsonl", [erb_records["ptbxl"], erb_records["mimic"]], tmp_path / "d", "--modalities", "text") == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("imported 10 of 15 ERB samples into") and line.count("\n") == 0
    assert "5 rejected: 1 answer_not_in_options, 1 duplicate_id, 1 not_json, 1 options_repeat, 1 record_missing" in line
    mimic = [it for it in load_audit(tmp_path / "d").items if it.record.db == "mimic_iv_ecg"]
    assert [it.id for it in mimic] == ["erb-mimic_iv_ecg-right_ventricular_hypertrophy-12"]
    assert mimic[0].record.path.endswith("files/p1972/p19729398/s41084804/41084804")


def test_questions_options_and_answers_stay_verbatim(imported, erb_fixtures):
    source = [json.loads(line) for line in (erb_fixtures / "ptbxl_new.jsonl").read_text().splitlines()[:9]]
    for item, sample in zip(load_audit(imported).items, source):
        data = sample["data"]
        assert item.initial.question == data["initial_diagnostic_question"]["question"]
        assert item.initial.answer == data["initial_diagnostic_question"]["answer"] and item.label == sample["metadata"]["dx_label"]
        assert len(item.loops) == len(data["reasoning"])
        for loop, raw in zip(item.loops, data["reasoning"]):
            assert (loop.criterion.options, loop.criterion.answer) == (raw["criterion_selection"]["options"], raw["criterion_selection"]["answer"])
            assert (loop.finding.question, loop.finding.answer) == (raw["finding_identification"]["question"], raw["finding_identification"]["answer"])
            assert loop.decision.answer == raw["diagnostic_decision"]["answer"]
            for g, rg in zip(loop.grounding, raw["ecg_grounding"], strict=True):
                assert g.kind == rg["question_type"].removesuffix("_grounding")
                assert (g.question, g.options) == (rg["question"], rg["options"])
                assert (g.answer if g.multi else [g.answer]) == rg["answer"]
        assert item.provenance.source == "erb" and item.provenance.params["metadata"] == sample["metadata"]
        assert item.provenance.params["keys"] == "new" and item.provenance.params["file"] == "ptbxl_new.jsonl"
        assert item.provenance.params["sample_id"] == str(sample["metadata"]["id"]) and item.provenance.method == "ecgtrace.agents.interop.erb"
    items = {it.id: it for it in load_audit(imported).items}
    avb1 = items["erb-ptbxl-first_degree_av_block-1"].loops[1].grounding[1]
    assert avb1.answer == "Above 240ms" and avb1.options[0] == "[200ms - 210ms]"
    lvh = items["erb-ptbxl-left_ventricular_hypertrophy-3"]
    assert lvh.diagnosis == "lvh" and lvh.loops[1].grounding[0].options == ["Lead V5", "Lead V6"]
    pair = items["erb-ptbxl-second_degree_av_block-4"].loops[0].grounding[0]
    assert pair.answer == "[6th QRS wave - 7th QRS wave]"
    imi = items["erb-ptbxl-inferior_myocardial_infarction-2"].loops[0]
    assert imi.finding.answer == "No" and imi.grounding[0].question.startswith("To verify that the inferior leads do not show")


def test_records_are_found_by_ecg_id_and_shown_whole(imported, erb_records):
    items = {it.id: it for it in load_audit(imported).items}
    lvh = items["erb-ptbxl-left_ventricular_hypertrophy-3"]
    assert lvh.record.path == str(erb_records["ptbxl"] / "records500" / "00000" / "00030_hr")
    assert lvh.record.fs_hz == 500 and lvh.window is not None and (lvh.window.t0_s, lvh.window.t1_s) == (0.0, 10.0)
    text = (imported / lvh.assets.text).read_text()
    assert "# leads: I,II,III,aVR,aVL,aVF,V1,V2,V3,V4,V5,V6" in text and "# effective_fs_hz: 100" in text
    assert lvh.assets.image is None  # --modalities text


def test_rate_100_reads_the_low_rate_records(erb_records, erb_fixtures, tmp_path):
    assert import_erb(erb_fixtures / "ptbxl_new.jsonl", [erb_records["ptbxl"]], tmp_path / "d", "--rate", "100", "--modalities", "text", "--limit", "2") == 0
    first = load_audit(tmp_path / "d").items[0]
    assert first.record.path.endswith("records100/00000/00001_lr") and first.record.fs_hz == 100
    assert first.provenance.params["rate_hz"] == 100


def test_older_per_sample_files_with_old_key_names(erb_records, erb_fixtures, tmp_path):
    assert import_erb(erb_fixtures / "old", [erb_records["ptbxl"]], tmp_path / "d", "--modalities", "text") == 0
    items = {it.id: it for it in load_audit(tmp_path / "d").items}
    assert sorted(items) == ["erb-ptbxl-anterior_ischemia-2003", "erb-ptbxl-complete_right_bundle_branch_block-2002",
                             "erb-ptbxl-first_degree_av_block-2001"]
    avb1 = items["erb-ptbxl-first_degree_av_block-2001"]
    assert avb1.initial.options == ["Yes", "No", "I don't know"] and avb1.initial.answer == "Yes"  # from dx_label
    assert avb1.loops[1].grounding[0].answer == "[3.36s - 3.59s]" and not avb1.loops[1].grounding[0].multi
    assert avb1.provenance.params["keys"] == "old" and avb1.provenance.params["line"] is None
    assert avb1.provenance.params["sample_id"] == "2001"  # older files name the sample by its file
    isch = items["erb-ptbxl-anterior_ischemia-2003"].loops[0].grounding[0]
    assert isch.multi and isch.answer == ["Lead V3", "Lead V4"]
    assert items["erb-ptbxl-complete_right_bundle_branch_block-2002"].path_id == "1"


def test_a_file_that_is_not_erb_gets_one_error_line(erb_records, erb_fixtures, tmp_path, capsys):
    code = import_erb(erb_fixtures / "not_erb.jsonl", [erb_records["ptbxl"]], tmp_path / "d")
    err = capsys.readouterr().err.strip()
    assert code != 0 and err.count("\n") == 0 and err.startswith("error:")
    assert "not an ECG-Reasoning-Benchmark sample" in err and "ecgtrace audit" in err
    assert not (tmp_path / "d").exists()


def test_bad_command_lines_are_one_error_each(erb_records, erb_fixtures, tmp_path, capsys):
    cases = [
        ([erb_fixtures / "ptbxl_new.jsonl", [tmp_path / "nowhere"], tmp_path / "d"], "--records folder not found"),
        ([erb_fixtures / "ptbxl_new.jsonl", [erb_records["ptbxl"]], erb_records["ptbxl"] / "out"], "inside the input folder"),
        ([tmp_path / "missing.jsonl", [erb_records["ptbxl"]], tmp_path / "d"], "no such file or folder"),
    ]
    for (source, roots, out), message in cases:
        assert import_erb(source, roots, out) != 0
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and message in err and err.count("\n") == 0
    assert not (erb_records["ptbxl"] / "out").exists()


def test_unreadable_and_non_12_lead_records_are_rejected(erb_records, erb_fixtures, tmp_path):
    import shutil

    root = tmp_path / "ptbxl"
    shutil.copytree(erb_records["ptbxl"] / "records500", root / "records500")
    dat = root / "records500" / "00000" / "00001_hr.dat"
    dat.write_bytes(dat.read_bytes()[:1000])  # truncated signal file
    hea = root / "records500" / "00000" / "00009_hr.hea"
    lines = hea.read_text().splitlines()
    hea.write_text("\n".join([lines[0].replace(" 12 ", " 11 ", 1), *lines[1:12]]) + "\n")  # V6 gone
    assert import_erb(erb_fixtures / "ptbxl_new.jsonl", [root], tmp_path / "d", "--modalities", "text") == 0
    rows = {r["line"]: r for r in map(json.loads, (tmp_path / "d" / "rejected.jsonl").read_text().splitlines())}
    assert rows[1]["code"] == "record_unreadable" and "truncated signal file" in rows[1]["reason"]
    assert rows[2]["code"] == "record_unreadable" and "not a 12-lead record (no lead V6)" in rows[2]["reason"]
    assert len(load_audit(tmp_path / "d").items) == 7


def test_no_sample_kept_is_an_error_that_still_writes_the_reasons(erb_fixtures, tmp_path, capsys):
    empty_root = tmp_path / "empty"
    empty_root.mkdir()
    assert import_erb(erb_fixtures / "ptbxl_new.jsonl", [empty_root], tmp_path / "d", "--modalities", "text") != 0
    assert "no ERB sample of" in capsys.readouterr().err
    assert set(rejected(tmp_path / "d").values()) >= {"record_missing", "options_repeat"}


def test_images_are_drawn_once_per_record_and_reused_on_rerun(erb_records, erb_fixtures, tmp_path):
    out = tmp_path / "d"
    args = ("--modalities", "image", "--px-per-mm", "3", "--limit", "2")
    assert import_erb(erb_fixtures / "ptbxl_new.jsonl", [erb_records["ptbxl"]], out, *args) == 0
    items = load_audit(out).items
    assert [it.assets.image for it in items] == ["assets/ptbxl-1-500hz-3x4.png", "assets/ptbxl-9-500hz-3x4.png"]
    png = out / items[0].assets.image
    from PIL import Image

    assert Image.open(png).size == ((20 + 250 + 5) * 3, Image.open(png).size[1])
    before = (png.stat().st_mtime_ns, (out / "audit.jsonl").read_bytes())
    assert import_erb(erb_fixtures / "ptbxl_new.jsonl", [erb_records["ptbxl"]], out, *args) == 0
    assert (png.stat().st_mtime_ns, (out / "audit.jsonl").read_bytes()) == before
    assert import_erb(erb_fixtures / "ptbxl_new.jsonl", [erb_records["ptbxl"]], out, *args, "--layout", "stacked") == 0
    stacked = out / load_audit(out).items[0].assets.image
    assert stacked.name == "ptbxl-1-500hz-stacked.png" and Image.open(stacked).size[1] > Image.open(png).size[1]


# ------------------------------------------------------------------ real PTB-XL records


def chance(turn: dict) -> float:
    """What a uniform random examinee scores on a turn: 1/k, or 1/(2^k - 1) for an exact set among k options."""
    k = len(turn["options"])
    return 1.0 / (2 ** k - 1) if turn["multi"] else 1.0 / k


def stage_of(turn: dict) -> str:
    return f"grounding:{turn['kind']}" if turn["stage"] == "grounding" else turn["stage"]


def test_real_ptbxl_import_oracle_scores_everything_and_random_lands_at_chance(shared_data, erb_fixtures, tmp_path):
    ptbxl = shared_data / "ptbxl"
    if not (ptbxl / "records500" / "00000" / "00030_hr.hea").exists():
        pytest.skip(f"PTB-XL records500 not found under {ptbxl}")
    out = tmp_path / "d"
    assert import_erb(erb_fixtures / "ptbxl_new.jsonl", [ptbxl], out, "--modalities", "text") == 0
    audit = load_audit(out)
    assert [it.id for it in audit.items] == KEPT and rejected(out) == REJECTED
    assert audit.items[0].record.leads[:6] == ["I", "II", "III", "AVR", "AVL", "AVF"]  # the record's own names

    oracle = asyncio.run(run_audit(audit, RunDir.open(tmp_path / "oracle", {"m": "oracle"}), OracleExaminee(), modality="text"))["overall"]
    for metric in ("ida", "gt_rda", "decision_acc", "completion"):
        assert oracle[metric]["value"] == 1.0, metric
    assert oracle["depth"]["value"] == 4.0 and oracle["depth_per_sample"]["value"] == 4.0
    assert all(block["value"] == 1.0 for block in oracle["stages"].values())

    turns = [t for it in audit.items for t in plan_turns(it)]
    expected: dict[str, list[float]] = {}
    for t in turns:
        expected.setdefault(stage_of(t), []).append(chance(t))
    got: dict[str, list[bool]] = {}
    seeds = range(12)
    for seed in seeds:
        run = RunDir.open(tmp_path / f"random{seed}", {"m": "random", "seed": seed})
        asyncio.run(run_audit(audit, run, RandomExaminee(seed), modality="text", prompt_style="erb"))
        for row in run.samples():
            for t in row["turns"]:
                got.setdefault(stage_of(t), []).append(bool(t["correct"]))
    for stage, chances in expected.items():
        n = len(got[stage])
        p = sum(chances) * len(seeds) / n
        observed = sum(got[stage]) / n
        assert abs(observed - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-9, (stage, observed, p, n)
