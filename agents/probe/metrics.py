"""Paired metrics of a probe run: does the answer follow the evidence?

Every kept counterfactual pairs turns of the original and of the edited item
(:class:`ecgtrace.contracts.TurnPair`, with what the answer should do). A
*unit* is one such turn pair, both asked. An answer is the option text (or the
set of texts) the parser read; an unreadable answer counts as one more answer
("unparsed"). Definitions (each a proportion with a Wilson 95 % interval, and
the level a uniform random answerer reaches, ``chance``):

* **sensitivity** - units whose truth changes (``expect: change``: the
  evidence removed, or the opposite window swapped in, with the same options):
  the answer changes. Chance ``1 - 1/n`` (multi-select ``1 - 1/(2^n - 1)``).
  An examinee that never looks at the ECG answers the same both times: 0.
* **grounded accuracy** - units whose truth changes or moves: right on both.
  Chance ``(1/n_o)(1/n_c)``.
* **localization follow** - units of a moved event (``expect: follow``): the
  span chosen on the edited window is the event's new one. Chance ``1/n``; also
  given right on the original.
* **invariance** - units of control edits (a normal beat replaced by another,
  truth unchanged): the answer does not change. Chance ``1/n``.
* **stability** - the other units whose truth does not change (criterion
  questions, a move's non-localization turns): the answer does not change.
* **McNemar** - on the changing and moving units, accuracy on the original
  against accuracy on the counterfactual (exact binomial under 25 discordant
  pairs, :func:`ecgtrace.metrics.mcnemar`).

Blocks: overall, per counterfactual kind, per group (diagnosis, QA task), per
stage (``initial``, ``finding``, ``grounding:wave`` ..., ``qa:closed_count``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ecgtrace.metrics import mcnemar, proportion

PROBE_METRICS_VERSION = "1"
METHOD = "ecgtrace.agents.probe.metrics.summarize_probe"
UNPARSED = "<unparsed>"


def _answer(turn: dict[str, Any]) -> Any:
    if turn.get("error") or not turn.get("parse_ok"):
        return UNPARSED
    parsed = turn.get("parsed")
    return tuple(sorted(parsed)) if isinstance(parsed, list) else parsed


def _n_choices(options_n: int, multi: bool) -> int:
    return (2 ** options_n - 1) if multi else max(options_n, 1)


def _turn(row: dict[str, Any], index: int) -> dict[str, Any] | None:
    turns = (row.get("sample") or {}).get("turns") or []
    for t in turns:
        if t.get("index") == index:
            return t
    return turns[index] if 0 <= index < len(turns) else None


def units(pairs: list[dict[str, Any]], rows: dict[str, dict[str, Any]], n_options: dict[tuple[str, int], tuple[int, bool]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The paired turns of ``pairs`` whose two samples are finished; and counts of what could not be paired."""
    out: list[dict[str, Any]] = []
    missing = {"pairs_not_finished": 0, "turns_not_asked": 0}
    for pair in pairs:
        o_row, c_row = rows.get(pair["original"]), rows.get(pair["id"])
        if o_row is None or c_row is None:
            missing["pairs_not_finished"] += 1
            continue
        for tp in pair["turns"]:
            o_t, c_t = _turn(o_row, tp["original"]), _turn(c_row, tp["counterfactual"])
            if o_t is None or c_t is None or not o_t.get("asked", True) or not c_t.get("asked", True):
                missing["turns_not_asked"] += 1
                continue
            n_o = _n_choices(*n_options.get((pair["original"], tp["original"]), (2, False)))
            n_c = _n_choices(*n_options.get((pair["id"], tp["counterfactual"]), (2, False)))
            stage = tp["stage"] if pair["source"] == "audit" else f"qa:{tp['stage']}"
            if tp["stage"] == "grounding" and tp.get("kind"):
                stage = f"grounding:{tp['kind']}"
            out.append({"pair": pair["id"], "kind": pair["kind"], "source": pair["source"], "group": pair["group"], "stage": stage, "expect": tp["expect"],
                        "o_ok": bool(o_t.get("correct")), "c_ok": bool(c_t.get("correct")), "changed": _answer(o_t) != _answer(c_t), "n_o": n_o, "n_c": n_c})
    return out, missing


def _prop(hits: list[bool], chance: list[float]) -> dict[str, Any]:
    p = proportion(sum(hits), len(hits))
    p["chance"] = round(sum(chance) / len(chance), 6) if chance else None
    return p


def block(us: list[dict[str, Any]]) -> dict[str, Any]:
    """Every metric of the module docstring over the units ``us``."""
    change = [u for u in us if u["expect"] == "change"]
    follow = [u for u in us if u["expect"] == "follow"]
    control = [u for u in us if u["kind"] == "control" and u["expect"] == "same"]
    stable = [u for u in us if u["kind"] != "control" and u["expect"] == "same"]
    scored = change + follow
    right_o = [u for u in follow if u["o_ok"]]
    return {
        "n_units": len(us),
        "n_pairs": len({u["pair"] for u in us}),
        "sensitivity": _prop([u["changed"] for u in change], [1.0 - 1.0 / u["n_o"] for u in change]),
        "grounded_accuracy": _prop([u["o_ok"] and u["c_ok"] for u in scored], [1.0 / (u["n_o"] * u["n_c"]) for u in scored]),
        "localization_follow": _prop([u["c_ok"] for u in follow], [1.0 / u["n_c"] for u in follow]),
        "follow_given_original_right": _prop([u["c_ok"] for u in right_o], [1.0 / u["n_c"] for u in right_o]),
        "invariance": _prop([not u["changed"] for u in control], [1.0 / u["n_o"] for u in control]),
        "stability": _prop([not u["changed"] for u in stable], [1.0 / u["n_o"] for u in stable]),
        "accuracy_original": _prop([u["o_ok"] for u in scored], [1.0 / u["n_o"] for u in scored]),
        "accuracy_counterfactual": _prop([u["c_ok"] for u in scored], [1.0 / u["n_c"] for u in scored]),
        "mcnemar": mcnemar(sum(1 for u in scored if u["o_ok"] and not u["c_ok"]), sum(1 for u in scored if u["c_ok"] and not u["o_ok"])),
    }


def _by(us: list[dict[str, Any]], key: str) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for u in us:
        groups[str(u[key])].append(u)
    return {name: block(groups[name]) for name in sorted(groups)}


def summarize_probe(rows: list[dict[str, Any]], pairs: list[dict[str, Any]], n_options: dict[tuple[str, int], tuple[int, bool]]) -> dict[str, Any]:
    """``{"overall", "per_kind", "per_group", "per_stage", "per_source", "unpaired", "provenance"}`` over the kept ``pairs``."""
    kept = [p for p in pairs if p["status"] == "kept"]
    us, missing = units(kept, {r["id"]: r for r in rows}, n_options)
    return {"overall": block(us), "per_kind": _by(us, "kind"), "per_source": _by(us, "source"), "per_group": _by(us, "group"),
            "per_stage": _by(us, "stage"), "unpaired": missing,
            "provenance": {"source": "computed", "method": METHOD, "version": PROBE_METRICS_VERSION,
                           "params": {"interval": "wilson", "mcnemar": "exact below 25 discordant pairs, else chi-square with continuity correction"}}}
