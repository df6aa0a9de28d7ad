"""Run control: a stratified --limit that grows, --sample-id, epochs with shuffled options, tokens and cost."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ecgtrace.agents.exam.run_control import (epoch_summary, load_pricing, select_items, shuffled_options, stratified_order,
                                              usage_summary)
from ecgtrace.errors import EcgTraceError

ITEMS = [{"id": f"{d}-{k:03d}", "diagnosis": d} for d, n in (("af", 30), ("pvc", 20), ("lbbb", 10)) for k in range(n)]


def _select(items, **kwargs):
    return select_items(items, stratum_of=lambda it: it["diagnosis"], id_of=lambda it: it["id"], seed=kwargs.pop("seed", 0), **kwargs)


def test_every_prefix_of_the_order_is_stratified_and_a_larger_limit_keeps_the_smaller() -> None:
    order = stratified_order(ITEMS, lambda it: it["diagnosis"], lambda it: it["id"], seed=3)
    assert sorted(it["id"] for it in order) == sorted(it["id"] for it in ITEMS)
    for n in (6, 12, 30):
        counts = Counter(it["diagnosis"] for it in order[:n])
        for diagnosis, size in (("af", 30), ("pvc", 20), ("lbbb", 10)):
            assert abs(counts[diagnosis] - n * size / 60) <= 1, (n, counts)
    small, large = _select(ITEMS, limit=20, seed=3), _select(ITEMS, limit=45, seed=3)
    assert large[:20] == small  # a run folder grows from --limit 20 without asking anything twice
    assert _select(list(reversed(ITEMS)), limit=20, seed=3) == small  # the file's order does not matter
    assert _select(ITEMS, limit=20, seed=4) != small
    assert _select(ITEMS) == ITEMS  # no limit: the dataset's own order


def test_sample_ids_pick_items_and_unknown_ids_are_refused() -> None:
    assert [it["id"] for it in _select(ITEMS, sample_ids=["pvc-003", "af-001", "pvc-003"])] == ["pvc-003", "af-001"]
    with pytest.raises(EcgTraceError, match="--sample-id 'nope' is not an item"):
        _select(ITEMS, sample_ids=["af-001", "nope"])


def test_epoch_zero_keeps_the_order_and_later_epochs_shuffle_it_the_same_way_each_time() -> None:
    options = ["A1", "B2", "C3", "D4", "E5"]
    assert shuffled_options(options, seed=0, sample_id="s", epoch=0) == options
    shown = [shuffled_options(options, seed=0, sample_id="s", epoch=e, index=2) for e in (1, 2, 3)]
    assert all(sorted(s) == options for s in shown) and any(s != options for s in shown)
    assert shown[0] == shuffled_options(options, seed=0, sample_id="s", epoch=1, index=2)
    assert shown[0] != shuffled_options(options, seed=1, sample_id="s", epoch=1, index=2) or shown[1] != shuffled_options(
        options, seed=1, sample_id="s", epoch=2, index=2)


def _row(sid: str, epoch: int, correct: list[bool]) -> dict:
    return {"id": sid if not epoch else f"{sid}#{epoch}", "epoch": epoch, "kind": "audit",
            "turns": [{"index": i, "asked": True, "correct": c} for i, c in enumerate(correct)]}


def test_epochs_reduce_to_the_mean_and_the_per_sample_agreement() -> None:
    rows = [_row("a", 0, [True, True]), _row("a", 1, [True, True]), _row("a", 2, [True, True]),
            _row("b", 0, [True, False]), _row("b", 1, [False, False]), _row("b", 2, [True, False]),
            _row("c", 0, [False, True]), _row("c", 1, [False, True])]  # c is missing epoch 2

    def headline(epoch_rows):
        turns = [t for r in epoch_rows for t in r["turns"]]
        return {"turn_accuracy": sum(t["correct"] for t in turns) / len(turns) if turns else None}

    block = epoch_summary(rows, 3, headline)
    assert [p["n"] for p in block["per_epoch"]] == [3, 3, 2]
    per_epoch = [4 / 6, 3 / 6, 3 / 4]
    assert [p["turn_accuracy"] for p in block["per_epoch"]] == pytest.approx(per_epoch)
    assert block["mean"]["turn_accuracy"]["value"] == pytest.approx(sum(per_epoch) / 3, abs=1e-6)
    agreement = block["agreement"]
    assert agreement["n_samples"] == 2 and agreement["samples_agree"] == 0.5  # a agrees, b flips; c is not in every epoch
    assert agreement["n_turns"] == 4 and agreement["turns_agree"] == 0.75  # b's first turn flipped
    assert block["unstable_samples"] == {"b": [0.5, 0.0, 0.5]}


def test_tokens_and_cost_per_model(tmp_path) -> None:
    rows = [{"id": "q1", "turns": [{"asked": True, "tokens": {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010}}],
             "judge": {"tokens": {"prompt_tokens": 500, "completion_tokens": 100, "total_tokens": 600}}},
            {"id": "q2", "turns": [{"asked": True, "tokens": None}], "judge": None},
            {"id": "q3", "turns": [{"asked": False}], "skipped": {"kind": "token_budget"}}]
    prices = {"openai:big": {"in": 2.5, "out": 10.0}, "openai:judge": {"in": 1.0, "out": 2.0}}
    usage = usage_summary(rows, {"examinee": "openai:big", "judge": "openai:judge"}, prices)
    big, judge = usage["per_model"]["openai:big"], usage["per_model"]["openai:judge"]
    assert big["requests"] == 2 and big["without_usage"] == 1 and big["tokens"]["prompt_tokens"] == 1000
    assert big["cost_usd"] == pytest.approx(1000 * 2.5 / 1e6 + 10 * 10.0 / 1e6)
    assert judge["requests"] == 1 and judge["cost_usd"] == pytest.approx(500 * 1.0 / 1e6 + 100 * 2.0 / 1e6)
    assert usage["cost_usd"] == pytest.approx(big["cost_usd"] + judge["cost_usd"])
    assert usage["tokens"]["total_tokens"] == 1610
    unpriced = usage_summary(rows, {"examinee": "openai:big", "judge": "openai:judge"}, {"openai:big": prices["openai:big"]})
    assert unpriced["cost_usd"] is None and unpriced["per_model"]["openai:judge"]["cost_usd"] is None  # never a partial total


def test_pricing_files(tmp_path) -> None:
    good = tmp_path / "prices.yaml"
    good.write_text("openai:gpt-4o: {in: 2.5, out: 10}\n")
    assert load_pricing(good) == {"openai:gpt-4o": {"in": 2.5, "out": 10.0}}
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps({"m": {"in": -1, "out": 2}}))
    with pytest.raises(EcgTraceError, match="needs non-negative numbers 'in' and 'out'"):
        load_pricing(bad)
    with pytest.raises(EcgTraceError, match="unreadable"):
        load_pricing(tmp_path / "missing.json")
