"""The run loop both examinations share: finished samples are skipped, each row is appended once, results cover the items."""

from __future__ import annotations

import asyncio

import pytest

from ecgtrace.agents.exam.examinees import HumanExaminee, OracleExaminee
from ecgtrace.agents.exam.run_loop import examine, worker_count, write_results
from ecgtrace.runlog import RunDir


def test_finished_samples_are_skipped_and_rows_land_before_after_append(tmp_path):
    run = RunDir.open(tmp_path / "run", {"test": 1})
    run.append_sample({"id": "b", "score": 1})
    items = [{"id": i} for i in "abcd"]
    seen, appended, after = [], [], []

    async def examine_one(item):
        seen.append(item["id"])
        await asyncio.sleep(0.001 * (4 - len(seen)))  # finish out of order
        return {"id": item["id"], "score": len(item["id"])}

    async def after_append(item):
        after.append((item["id"], item["id"] in {r["id"] for r in run.samples()}))  # on disk by now

    asyncio.run(examine(run, items, examine_one, workers=3, on_sample=lambda row: appended.append(row["id"]), after_append=after_append))
    assert sorted(seen) == ["a", "c", "d"] and sorted(appended) == ["a", "c", "d"]
    assert sorted(after) == [("a", True), ("c", True), ("d", True)]
    results = write_results(run, items[:3], lambda rows: {"total": sum(r["score"] for r in rows)}, kind="test")
    assert results == {"kind": "test", "run_id": run.run_id, "n_items": 3, "n_finished": 3, "complete": True, "total": 3}
    asyncio.run(examine(run, items, examine_one, workers=3))  # a rerun asks nothing
    assert len(seen) == 3


def test_an_error_stops_the_run_and_keeps_what_was_appended(tmp_path):
    run = RunDir.open(tmp_path / "run", {"test": 2})

    async def examine_one(item):
        if item["id"] == "c":
            raise KeyboardInterrupt
        return {"id": item["id"]}

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(examine(run, [{"id": i} for i in "abcd"], examine_one, workers=1))
    assert [r["id"] for r in run.samples()] == ["a", "b"]


def test_a_person_answers_one_sample_at_a_time():
    assert worker_count(HumanExaminee(), 8) == 1 and worker_count(OracleExaminee(), 8) == 8 and worker_count(OracleExaminee(), 0) == 1
