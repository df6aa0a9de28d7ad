"""Items on detector annotations keep only the event kinds validated from the signal (ecgtrace.tools.signal_trust)."""

from __future__ import annotations

import pytest

from ecgtrace.agents.holter import annotator, planner, verifier, writer
from ecgtrace.agents.holter.facts import Facts, load_facts
from ecgtrace.contracts.vocabulary import QA_EVENT_KINDS
from ecgtrace.rubrics.template_schema import load_templates
from ecgtrace.tools import signal_trust as st
from ecgtrace.tools.annotate import annotation_versions

TASKS = ["closed_count", "open_timing", "closed_presence", "closed_diagnosis", "open_diagnosis", "closed_hr_extremum", "report_summary"]


@pytest.fixture(scope="module")
def bundles(synth_record, tmp_path_factory):
    """The synthetic record's reference annotations, and the same bundle as if the detectors had written it."""
    ref = annotator.load_record(synth_record.record_path)
    facts = load_facts(annotator.annotate(ref, tmp_path_factory.mktemp("cache"))["path"])
    return facts, Facts({**facts.bundle, "source": "detected"})


def _items(facts: Facts) -> list[dict]:
    templates = load_templates(tasks=TASKS)
    items = []
    for entry in planner.plan(facts, templates, 3):
        template = next(t for t in templates if t.id == entry["template_id"])
        items += writer.write_items(facts, template, entry["targets"], seed=3, measure=False)
    return items


def _table(trusted: set[str]) -> st.TrustTable:
    return st.TrustTable(annotation_versions(), {k: (20, 20, 20, 20) if k in trusted else (5, 20, 5, 20) for k in QA_EVENT_KINDS})


@pytest.fixture()
def trust(monkeypatch):
    """Install a trust table in place of the shipped one."""
    def install(trusted: set[str]) -> None:
        monkeypatch.setattr(st, "_shipped", lambda: _table(trusted))
    return install


def test_reference_annotations_are_never_gated(bundles, trust):
    facts, _ = bundles
    trust(set())
    kept, dropped = verifier.verify(facts, _items(facts))
    assert kept and not any(d["reason"].startswith("not validated from the signal") for d in dropped)
    assert all("signal_trust" not in it["provenance"]["params"] for it in kept)


def test_detected_annotations_keep_only_validated_kinds(bundles, trust):
    _, detected = bundles
    trust({"pvc"})
    items = _items(detected)
    kept, dropped = verifier.verify(detected, items)
    gated = [d for d in dropped if d["reason"].startswith("not validated from the signal")]
    assert gated and "Se 25.0% (5/20)" in gated[0]["reason"]
    assert {it["task"] for it in kept} >= {"closed_hr_extremum"}  # heart rate rests on the beats alone
    for it in kept:
        kinds = get_asserted(it)
        assert kinds is not None and kinds <= {"pvc"}, (it["task"], kinds)
        assert all(v["trusted"] for v in it["provenance"]["params"]["signal_trust"].values())
    assert not any(it["task"] in ("report_summary", "open_diagnosis") for it in kept)  # they assert every kind
    pvc_items = [it for it in items if it["_target"].get("kind") == "pvc" and it["task"] in ("closed_count", "open_timing")]
    assert pvc_items and all(it["id"] in {k["id"] for k in kept} | {d["id"] for d in dropped if not d["reason"].startswith("not validated")}
                             for it in pvc_items)


def test_every_kind_trusted_drops_nothing_for_trust(bundles, trust):
    _, detected = bundles
    trust(set(QA_EVENT_KINDS))
    _, dropped = verifier.verify(detected, _items(detected))
    assert not any(d["reason"].startswith("not validated from the signal") for d in dropped)


def test_all_keeps_every_item_and_records_the_verdicts(bundles, trust):
    _, detected = bundles
    trust(set())
    kept_all, dropped_all = verifier.verify(detected, _items(detected), detected_kinds="all")
    assert not any(d["reason"].startswith("not validated from the signal") for d in dropped_all)
    counted = [it for it in kept_all if it["task"] == "closed_count"]
    assert counted and all(not v["trusted"] for it in counted for v in it["provenance"]["params"]["signal_trust"].values())
    with pytest.raises(ValueError, match="detected_kinds"):
        verifier.verify(detected, [], detected_kinds="some")


def test_a_normal_strip_and_a_diagnosis_option_count_as_asserted(bundles):
    from ecgtrace.agents.holter.tasks import get_task

    _, detected = bundles
    items = _items(detected)
    normal = next(it for it in items if it["_target"].get("kind") == "normal")
    assert get_task(normal["task"]).asserted_kinds(normal) is None
    closed = [it for it in items if it["task"] == "closed_diagnosis" and it["_target"].get("kind") not in (None, "normal")]
    assert any("normal sinus rhythm" in it["_distractors"] for it in closed)
    for it in closed:
        asserted = get_task("closed_diagnosis").asserted_kinds(it)
        assert it["_target"]["kind"] in asserted and len(asserted) == 1 + len([d for d in it["_distractors"] if d != "normal sinus rhythm"])


def get_asserted(item: dict) -> frozenset[str] | None:
    from ecgtrace.agents.holter.tasks import get_task

    return get_task(item["task"]).asserted_kinds(item)
