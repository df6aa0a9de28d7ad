"""Which samples a run examines, how often, and what they cost: the run-control part of the shared pipeline.

* :func:`stratified_order` / :func:`select_items`: ``--limit N`` takes the first
  N items of one seeded order in which every stratum (an audit's diagnosis, a
  QA item's task) is spread evenly, so any prefix is stratified and a larger
  limit keeps every item a smaller one chose: a run folder grows from
  ``--limit 20`` to the whole dataset without asking anything twice.
  ``--sample-id`` picks items by id.
* :func:`shuffled_options`: ``--epochs K`` asks every item K times; epoch 0
  keeps the dataset's option order, each later epoch shows the options of every
  closed turn in a seeded random order (the answer is an option text, so
  scoring does not change). :func:`epoch_summary` reduces the epochs to the
  mean of the headline metrics and the per-sample agreement, which is what
  position bias moves.
* :func:`usage_summary`: tokens (the server's ``usage``) and cost per model,
  with prices per 1M tokens (``--price-in``/``--price-out`` or a pricing file,
  :func:`load_pricing`).
"""

from __future__ import annotations

import json
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ecgtrace.contracts.runs import item_id_of
from ecgtrace.errors import EcgTraceError

T = TypeVar("T")
#: Bump when the shuffle or the order changes: part of a run's identity.
SHUFFLE_VERSION = "1"
TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _rank(seed: int, *parts: Any) -> float:
    return random.Random(":".join(str(p) for p in (seed, *parts))).random()


def stratified_order(items: Sequence[T], stratum_of: Callable[[T], str], id_of: Callable[[T], str], seed: int) -> list[T]:
    """Every item, in a seeded order that spreads each stratum evenly over the whole list.

    Within a stratum of n items the order is a seeded shuffle; the k-th item
    of the stratum gets the position ``(k + u) / n`` (``u`` one seeded offset
    per stratum in [0, 1)), and the list is sorted by position. So the first N
    items hold about ``N * n / total`` of each stratum, and the order depends on
    the seed and the ids only, not on the file's order.
    """
    strata: dict[str, list[T]] = defaultdict(list)
    for item in items:
        strata[stratum_of(item)].append(item)
    keyed = []
    for name, members in strata.items():
        members = sorted(members, key=lambda it: (_rank(seed, "item", id_of(it)), id_of(it)))
        offset = _rank(seed, "stratum", name)
        keyed += [((k + offset) / len(members), name, id_of(it), it) for k, it in enumerate(members)]
    return [entry[-1] for entry in sorted(keyed, key=lambda e: e[:3])]


def select_items(items: Sequence[T], *, stratum_of: Callable[[T], str], id_of: Callable[[T], str], seed: int,
                 limit: int | None = None, sample_ids: Sequence[str] | None = None) -> list[T]:
    """The items a run examines: ``sample_ids`` (in the order given) or every item, then the first ``limit`` of the stratified order.

    With neither, the dataset's own order is kept. Unknown ids are refused.
    """
    chosen = list(items)
    if sample_ids:
        by_id = {id_of(it): it for it in items}
        unknown = [sid for sid in sample_ids if sid not in by_id]
        if unknown:
            raise EcgTraceError(f"--sample-id {unknown[0]!r} is not an item of the dataset ({len(unknown)} unknown id(s))")
        chosen = [by_id[sid] for sid in dict.fromkeys(sample_ids)]
    if limit is not None:
        chosen = stratified_order(chosen, stratum_of, id_of, seed)[:limit] if not sample_ids else chosen[:limit]
    return chosen


def shuffled_options(options: Sequence[str], *, seed: int, sample_id: str, epoch: int, index: int = 0) -> list[str]:
    """The options of turn ``index`` of a sample as shown in ``epoch`` (epoch 0: as the dataset has them)."""
    shown = list(options)
    if epoch:
        random.Random(f"{seed}:{SHUFFLE_VERSION}:{sample_id}:{epoch}:{index}").shuffle(shown)
    return shown


# ------------------------------------------------------------------ epochs

def _outcome(row: dict[str, Any]) -> tuple[Any, ...]:
    """What must agree across epochs: each asked turn's correctness (and score, for QA)."""
    return tuple((t["index"], t.get("correct"), t.get("score")) for t in row["turns"] if t.get("asked", True))


def _turn_share(row: dict[str, Any]) -> float | None:
    """A sample's result in one epoch: its score (0-1) for QA, else the share of asked turns answered correctly."""
    if row.get("kind") == "qa":
        return float(row.get("score") or 0.0) / 100.0
    asked = [t for t in row["turns"] if t.get("asked", True)]
    return sum(bool(t.get("correct")) for t in asked) / len(asked) if asked else None


def epoch_summary(rows: list[dict[str, Any]], epochs: int, headline: Callable[[list[dict[str, Any]]], dict[str, float | None]]) -> dict[str, Any]:
    """The epochs reduced: headline metrics per epoch and their mean, and how often samples agree with themselves.

    ``rows`` are the answered rows of every epoch; ``headline(rows)`` gives the
    named metrics of one epoch's rows. Agreement is computed on the samples
    answered in every epoch: ``samples_agree`` is the share whose every turn
    scored the same in all epochs, ``turns_agree`` the share of (sample, turn)
    pairs asked in all epochs whose correctness never changed.
    """
    by_epoch: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_epoch[int(row.get("epoch") or 0)].append(row)
    per_epoch = [{"epoch": e, "n": len(by_epoch.get(e, [])), **headline(by_epoch.get(e, []))} for e in range(epochs)]
    names = [k for k in per_epoch[0] if k not in ("epoch", "n")]
    mean = {}
    for name in names:
        values = [float(p[name]) for p in per_epoch if p.get(name) is not None]
        mean[name] = {"value": round(statistics.fmean(values), 6) if values else None, "n_epochs": len(values),
                      "sd": round(statistics.stdev(values), 6) if len(values) > 1 else None}
    per_sample: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        per_sample[item_id_of(row)][int(row.get("epoch") or 0)] = row
    complete = {sid: got for sid, got in per_sample.items() if len(got) == epochs}
    agree = sorted(sid for sid, got in complete.items() if len({_outcome(r) for r in got.values()}) == 1)
    units = total = 0
    for got in complete.values():
        turns = [{t["index"]: t.get("correct") for t in r["turns"] if t.get("asked", True)} for r in got.values()]
        shared = set.intersection(*(set(t) for t in turns))
        total += len(shared)
        units += sum(1 for i in shared if len({t[i] for t in turns}) == 1)
    unstable = {sid: [_turn_share(got[e]) for e in range(epochs)] for sid, got in sorted(complete.items()) if sid not in set(agree)}
    return {"epochs": epochs, "shuffle": f"options of every closed turn in a seeded random order from epoch 1 on (version {SHUFFLE_VERSION}); "
            "epoch 0 keeps the dataset's order", "per_epoch": per_epoch, "mean": mean,
            "agreement": {"n_samples": len(complete), "samples_agree": round(len(agree) / len(complete), 6) if complete else None,
                          "n_turns": total, "turns_agree": round(units / total, 6) if total else None},
            "unstable_samples": {sid: [None if v is None else round(v, 6) for v in values] for sid, values in unstable.items()}}


# ------------------------------------------------------------------ tokens and cost

def load_pricing(path: str | Path) -> dict[str, dict[str, float]]:
    """A pricing file: ``{"<model>": {"in": USD per 1M prompt tokens, "out": USD per 1M completion tokens}}`` (JSON or YAML)."""
    import yaml

    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) if file.suffix in (".yaml", ".yml") else json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise EcgTraceError(f"--pricing {file}: unreadable ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise EcgTraceError(f"--pricing {file}: expected a mapping of model name to {{in, out}} prices")
    out = {}
    for model, price in data.items():
        if not isinstance(price, dict) or not all(isinstance(price.get(k), int | float) and price[k] >= 0 for k in ("in", "out")):
            raise EcgTraceError(f"--pricing {file}: model {model!r} needs non-negative numbers 'in' and 'out' (USD per 1M tokens)")
        out[str(model)] = {"in": float(price["in"]), "out": float(price["out"])}
    return out


def _add(total: Counter[str], usage: Any) -> bool:
    if not isinstance(usage, dict):
        return False
    found = False
    for key in TOKEN_KEYS:
        if isinstance(usage.get(key), int):
            total[key] += usage[key]
            found = True
    return found


def usage_summary(rows: list[dict[str, Any]], models: dict[str, str | None], pricing: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """Requests, tokens and cost of a run, overall and per model (the model under test, the judge).

    ``models`` names the model of each role (``{"examinee": "openai:gpt-4o", "judge": ...}``).
    A model's cost is computed when ``pricing`` has it (by that name); requests
    whose server sent no ``usage`` are counted as such, never guessed.
    """
    per_role: dict[str, dict[str, Any]] = {}
    for role, name in models.items():
        if name:
            per_role[role] = {"model": name, "requests": 0, "without_usage": 0, "tokens": Counter()}
    for row in rows:
        turns = [t for t in row.get("turns", []) if t.get("asked", True)]
        if "examinee" in per_role:
            for turn in turns:
                block = per_role["examinee"]
                block["requests"] += 1
                block["without_usage"] += 0 if _add(block["tokens"], turn.get("tokens")) else 1
        judged = row.get("judge")
        if "judge" in per_role and isinstance(judged, dict):
            block = per_role["judge"]
            block["requests"] += 1
            block["without_usage"] += 0 if _add(block["tokens"], judged.get("tokens")) else 1
    per_model: dict[str, Any] = {}
    overall: Counter[str] = Counter()
    cost_total: float | None = 0.0 if per_role else None
    for role, block in per_role.items():
        price = (pricing or {}).get(block["model"])
        tokens = dict(block["tokens"])
        cost = None
        if price is not None:
            cost = round(tokens.get("prompt_tokens", 0) * price["in"] / 1e6 + tokens.get("completion_tokens", 0) * price["out"] / 1e6, 6)
        cost_total = None if cost is None or cost_total is None else round(cost_total + cost, 6)
        overall.update(tokens)
        entry = per_model.setdefault(block["model"], {"roles": [], "requests": 0, "without_usage": 0, "tokens": Counter(), "cost_usd": 0.0})
        entry["roles"].append(role)
        entry["requests"] += block["requests"]
        entry["without_usage"] += block["without_usage"]
        entry["tokens"].update(tokens)
        entry["price_per_1m_usd"] = price
        entry["cost_usd"] = None if cost is None or entry["cost_usd"] is None else round(entry["cost_usd"] + cost, 6)
    for entry in per_model.values():
        entry["tokens"] = {k: entry["tokens"].get(k, 0) for k in TOKEN_KEYS}
    return {"requests": sum(b["requests"] for b in per_role.values()), "without_usage": sum(b["without_usage"] for b in per_role.values()),
            "tokens": {k: overall.get(k, 0) for k in TOKEN_KEYS}, "cost_usd": cost_total, "currency": "USD",
            "per_model": per_model, "source": "server-reported usage of each request; cost = tokens x price per 1M tokens"}
