"""Measurement-grounding questions: the bin that holds a measured value, and where its answer sits.

Two ways to draw the bins (a graph's measurement rule says which):

* ``bin_width``: ``n_options`` consecutive bins of one width, ``"[200-220] ms"``;
* ``bin_edges`` (ERB's way): bins between given edges, so widths vary, with
  open edge bins - options such as ``"Below 200ms"``, ``"[200ms - 210ms]"``,
  ``"Above 240ms"`` (3 to 5 of them). A window of edges ``e_p .. e_q`` offers
  "Below e_p", the closed bins between them and "Above e_q"; a closed bin
  is ``[lo, hi)``, "Below X" is ``< X`` and "Above X" is ``>= X``.

Either way, bins are sorted ascending (position A is "the lowest bin") and a
question never offers a bin the finding just answered rules out (after "PR >
200 ms: yes" no "[180-200] ms" and no "Below 200ms"; after "PR > 200 ms: no",
nothing above 200 ms), nor a negative bin for a non-negative value. A value
just past the threshold can then only sit at an edge position, which made
"pick A" beat chance. Each question records the answer positions it allows in
``provenance.params.measurement_grounding``, with ``edge_distance`` (the value's distance to the nearest bin
edge) and ``tolerance`` (the feature's measurement tolerance there, :mod:`ecgtrace.rubrics.diagnosis_features`),
both in the rule's unit: where the distance is the smaller, the neighbouring bin could be the true one. Such
questions are kept (ERB's 10 ms PR bins are narrower than two tolerances, so every PR answer would go) and
can be filtered on these fields; :func:`balance_measurement`
places every answer over a whole set (a record's, then the final dataset's)
so that each position holds at most ``T/n + 1`` of the ``T`` questions with
``n`` options: most constrained questions first, each at its least-used
allowed position; while a position is still over-full, the most constrained
question there is dropped with reason ``balance_measurement_position`` in
``grounding_skipped``. Answers (the bin that holds the value) never change.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import Any

import numpy as np

from ecgtrace.agents.audit._surface import _pick
from ecgtrace.agents.audit.engine import MissingFeature, feature_in_unit
from ecgtrace.rubrics.diagnosis_features import feature_tolerance
from ecgtrace.rubrics.diagnosis_schema import GroundingRule, unit_factor

SKIP_POSITION = "balance_measurement_position"
POSITION_SLACK = 1.0  # a measurement answer position may exceed its uniform share by at most this (in questions)
#: How ERB writes a unit after a number: "240ms", "1.1mV", but "80 bpm", "75 degrees".
_GLUED_UNITS = {"ms": "ms", "s": "s", "mV": "mV", "uV": "uV", "%": "%", "mV*s": "mV*s"}
_UNIT_WORDS = {"deg": "degrees", "degree": "degrees"}
_NEGATE = {">": "<=", ">=": "<", "<": ">=", "<=": ">"}


class GroundingSkipped(Exception):
    """This grounding question cannot be asked on this window (reason in args[0])."""


def _fmt_num(x: float) -> str:
    text = f"{round(x, 6):.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def bin_text(lo: float, hi: float, unit: str) -> str:
    """``[200-210] ms``; ``[-45 to -30] deg`` when a bound is negative."""
    sep = " to " if lo < 0 or hi < 0 else "-"
    return f"[{_fmt_num(lo)}{sep}{_fmt_num(hi)}] {unit}"


def erb_number(x: float, unit: str) -> str:
    """A number with its unit as ERB writes it: ``240ms``, ``1.1mV``, ``80 bpm``, ``75 degrees``."""
    glued = _GLUED_UNITS.get(unit)
    return f"{_fmt_num(x)}{glued}" if glued else f"{_fmt_num(x)} {_UNIT_WORDS.get(unit, unit)}".rstrip()


def erb_bin_text(lo: float | None, hi: float | None, unit: str) -> str:
    """``[200ms - 210ms]``; ``Below 200ms`` (no ``lo``); ``Above 240ms`` (no ``hi``)."""
    if lo is None:
        return f"Below {erb_number(hi, unit)}"  # type: ignore[arg-type]
    if hi is None:
        return f"Above {erb_number(lo, unit)}"
    return f"[{erb_number(lo, unit)} - {erb_number(hi, unit)}]"


def finding_bound(finding: dict[str, Any], rule: GroundingRule, present: bool = True) -> tuple[str, float] | None:
    """``(op, threshold in the rule's unit)`` the value satisfies, when the finding is one window-level test of the
    measured feature (else None): the finding's own test when it is present, its negation when absent."""
    if finding.get("feature") != rule.feature or "lead" in finding or "leads" in finding or isinstance(finding.get("value"), bool):
        return None
    to_canonical = unit_factor(rule.feature or "", str(finding.get("unit")))
    to_rule = unit_factor(rule.feature or "", rule.unit or "")
    if to_canonical is None or not to_rule or finding.get("op") not in (">", ">=", "<", "<="):
        return None
    op = str(finding["op"])
    return (op if present else _NEGATE[op]), float(finding["value"]) * to_canonical / to_rule


def _excluded(lo: float, hi: float, value: float, bound: tuple[str, float] | None) -> bool:
    """The bin ``[lo, hi)`` (infinite ends for open bins) cannot hold a value that satisfies ``bound``, or is negative for a
    non-negative value."""
    if value >= 0 and hi <= 0 and lo < 0:
        return True
    if bound is None:
        return False
    op, threshold = bound
    return hi <= threshold if op in (">", ">=") else lo > threshold if op == "<=" else lo >= threshold


def _value(rule: GroundingRule, features: dict[str, Any]) -> float:
    try:
        return feature_in_unit(features, rule.feature or "", rule.unit or "")
    except MissingFeature as exc:
        raise GroundingSkipped(f"feature_unavailable:{exc.feature}") from None


def measurement_entry(rule: GroundingRule, features: dict[str, Any], rng: np.random.Generator,
                      bound: tuple[str, float] | None = None) -> dict[str, Any]:
    """The measured bin and the answer positions allowed for one measurement rule (see the module docstring).

    ``positions`` are the answer positions of the windows that offer no bin
    ``bound`` excludes; with ``bin_width``, a value so close to the threshold
    (or to zero) that no window of ``n_options`` bins is clean gets fewer
    options (not below 3), and none at all is skipped
    (``no_bins_clear_of_the_finding``). ``chosen`` is a provisional uniform
    draw among the positions, re-chosen over a whole set by :func:`balance_measurement`.
    """
    if rule.bin_edges:
        return _edges_entry(rule, _value(rule, features), rng, bound)
    value = _value(rule, features)
    width = float(rule.bin_width or 1.0)
    k0 = math.floor(value / width + 1e-9)
    for n in range(rule.n_options, min(3, rule.n_options) - 1, -1):  # fewer options before any that the finding rules out
        positions = [p for p in range(n) if not any(_excluded(k * width, (k + 1) * width, value, bound) for k in range(k0 - p, k0 - p + n))]
        if positions:
            return {"question": _pick(rng, rule.questions), "k0": int(k0), "width": width, "unit": rule.unit or "", "n": int(n),
                    "positions": positions, "chosen": positions[int(rng.integers(len(positions)))], "dropped": None,
                    **edge_margin(rule, value, [k0 * width, (k0 + 1) * width])}
    raise GroundingSkipped("no_bins_clear_of_the_finding")


def edge_margin(rule: GroundingRule, value: float, edges: list[float]) -> dict[str, float]:
    """How far ``value`` lies from the nearest of ``edges`` and the feature's measurement tolerance there, both in the
    rule's unit: with ``edge_distance`` under ``tolerance`` the neighbouring bin could hold the true value."""
    factor = unit_factor(rule.feature or "", rule.unit or "") or 1.0
    nearest = min(edges, key=lambda edge: abs(value - edge))
    return {"edge_distance": round(abs(value - nearest), 9), "tolerance": round(feature_tolerance(rule.feature or "", nearest * factor) / factor, 9)}


def _edge_window(edges: list[float], p: int, q: int, value: float, bound: tuple[str, float] | None
                 ) -> tuple[list[tuple[float, float]], int] | None:
    """The bins of the window ``edges[p]..edges[q]`` (open ends as infinities) without excluded open bins, and the
    answer's index; None when a closed bin is excluded or the value falls in a dropped open bin."""
    bins = [(-math.inf, edges[p]), *zip(edges[p:q], edges[p + 1:q + 1]), (edges[q], math.inf)]
    if any(_excluded(lo, hi, value, bound) for lo, hi in bins[1:-1]):
        return None
    kept = [b for k, b in enumerate(bins) if 0 < k < len(bins) - 1 or not _excluded(*b, value, bound)]
    at = [k for k, (lo, hi) in enumerate(kept) if lo <= value < hi]
    return (kept, at[0]) if at else None


def _edges_entry(rule: GroundingRule, value: float, rng: np.random.Generator, bound: tuple[str, float] | None) -> dict[str, Any]:
    edges = [float(e) for e in rule.bin_edges]
    sizes: dict[int, dict[int, list[list[int]]]] = {}
    for p in range(len(edges)):
        for q in range(p + 1, len(edges)):
            window = _edge_window(edges, p, q, value, bound)
            if window is not None and 3 <= len(window[0]) <= 5:
                sizes.setdefault(len(window[0]), {}).setdefault(window[1], []).append([p, q])
    if not sizes:
        raise GroundingSkipped("no_bins_around_value")
    n = min(sizes, key=lambda size: (abs(size - rule.n_options), -size))
    found = sizes[n]
    positions = sorted(found)
    windows = {str(pos): [found[pos][int(i)] for i in rng.permutation(len(found[pos]))] for pos in positions}
    return {"question": _pick(rng, rule.questions), "style": "edges", "edges": edges, "value": float(value), "bound": list(bound) if bound else None,
            "unit": rule.unit or "", "n": int(n), "windows": windows, "positions": positions,
            "chosen": positions[int(rng.integers(len(positions)))], "dropped": None, **edge_margin(rule, value, edges)}


def measurement_from_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The question of a measurement entry with its answer at position ``entry["chosen"]``."""
    if entry.get("style") == "edges":
        p, q = entry["windows"][str(entry["chosen"])][0]
        bound = tuple(entry["bound"]) if entry.get("bound") else None
        bins, at = _edge_window(entry["edges"], p, q, entry["value"], bound)  # type: ignore[misc,arg-type]
        options = [erb_bin_text(None if math.isinf(lo) else lo, None if math.isinf(hi) else hi, entry["unit"]) for lo, hi in bins]
        return {"kind": "measurement", "question": entry["question"], "options": options, "answer": options[at], "multi": False}
    first = entry["k0"] - entry["chosen"]
    options = [bin_text(k * entry["width"], (k + 1) * entry["width"], entry["unit"]) for k in range(first, first + entry["n"])]
    return {"kind": "measurement", "question": entry["question"], "options": options, "answer": options[entry["chosen"]], "multi": False}


def measurement_question(rule: GroundingRule, features: dict[str, Any], rng: np.random.Generator,
                         bound: tuple[str, float] | None = None) -> dict[str, Any]:
    """The bin holding the measured value (answer position: a uniform draw among the windows that offer no bin
    excluded by ``bound``; see :func:`measurement_entry`)."""
    return measurement_from_entry(measurement_entry(rule, features, rng, bound))


# ---------------------------------------------------------------- answer position over a set


def _assign_positions(slots: list[tuple[dict[str, Any], list[int]]]) -> Counter:
    """Most constrained first, each entry takes its allowed position used least so far (ties: its own seeded order)."""
    used: Counter = Counter()
    for entry, order in sorted(slots, key=lambda s: len(s[1])):
        pick = min(order, key=lambda p: used[(entry["n"], p)])
        entry["chosen"] = pick
        used[(entry["n"], pick)] += 1
    return used


def balance_measurement(items: list[dict[str, Any]], rng: np.random.Generator) -> None:
    """Place every measurement answer over ``items`` so that its position is uniform; rebuild the questions in place.

    Each entry may only use its ``positions``. Entries are assigned most
    constrained first, each to its allowed position used least so far among
    questions with as many options. While a position holds more than
    ``T/n + POSITION_SLACK`` of the ``T`` kept questions with ``n`` options,
    the entry there with the fewest allowed positions (ties: a seeded order)
    is dropped with reason :data:`SKIP_POSITION` and the rest re-assigned.
    """
    refs = [(n, e) for n, item in enumerate(items) for e in range(len(item["provenance"]["params"].get("measurement_grounding", [])))]
    refs = [refs[int(i)] for i in rng.permutation(len(refs))]
    slots = []
    for n, e in refs:
        entry = items[n]["provenance"]["params"]["measurement_grounding"][e]
        entry["dropped"] = None
        slots.append((entry, [entry["positions"][int(i)] for i in rng.permutation(len(entry["positions"]))]))
    while True:
        used = _assign_positions(slots)
        totals: Counter = Counter(entry["n"] for entry, _ in slots)
        excess = {key: c - (totals[key[0]] / key[0] + POSITION_SLACK) for key, c in used.items()}
        key = max(excess, key=lambda k: (excess[k], -k[0], -k[1]), default=None)
        if key is None or excess[key] <= 0:
            break
        there = [k for k, (entry, _) in enumerate(slots) if entry["n"] == key[0] and entry["chosen"] == key[1]]
        drop = min(reversed(there), key=lambda k: len(slots[k][1]))  # the most constrained; ties: last in the seeded order
        slots[drop][0]["dropped"] = SKIP_POSITION
        del slots[drop]
    for item in items:
        _rebuild_measurement(item)


def _placed(loop: dict[str, Any], entry: dict[str, Any]) -> list[int]:
    """Where the entry's question sits in the loop's grounding (by question and measured bin, wherever it was placed)."""
    def holds(g: dict[str, Any]) -> bool:
        if entry.get("style") == "edges":
            return g["options"] in [measurement_from_entry({**entry, "chosen": pos})["options"] for pos in entry["positions"]]
        return g["answer"] == bin_text(entry["k0"] * entry["width"], (entry["k0"] + 1) * entry["width"], entry["unit"])

    return [i for i, g in enumerate(loop["grounding"]) if g["kind"] == "measurement" and g["question"] == entry["question"] and holds(g)]


def _rebuild_measurement(item: dict[str, Any]) -> None:
    params = item["provenance"]["params"]
    entries = params.get("measurement_grounding", [])
    if not entries:
        return
    skipped = [s for s in params.get("grounding_skipped", []) if not s.endswith(f".measurement:{SKIP_POSITION}")]
    for entry in entries:
        loop = item["loops"][entry["loop"]]
        at = _placed(loop, entry)
        if entry["dropped"]:
            skipped.append(f"{entry['criterion']}.measurement:{entry['dropped']}")
            if at:
                del loop["grounding"][at[0]]
        elif at:
            loop["grounding"][at[0]] = measurement_from_entry(entry)
        else:
            loop["grounding"].append(measurement_from_entry(entry))
    params["grounding_skipped"] = skipped
