"""Tokens and cost of a run, in total and per model: the one place the report and the viewer read them from.

Tokens are the server-reported ``usage`` of each turn (``TurnRow.tokens``:
``prompt_tokens``, ``completion_tokens``, ``total_tokens``) and of each judge
verdict; turns whose server reported nothing are counted as requests without
tokens (``reported`` says how many did report). A turn is attributed to the
model the server says answered it (``meta.model``), else to the run's model.

Cost is shown only when the run says what a token costs: a ``price`` block in
``results.json`` or prices in the header's ``settings`` (USD per million input
and output tokens: ``price_in`` / ``price_out``, or ``price_in_per_mtok`` /
``price_out_per_mtok``). Without a price the cost is None (shown as tokens only),
never a guess.

When the run itself wrote its totals (``results.json`` ``usage`` with a
``per_model`` mapping, as the run controls of issue 16c write it: tokens and
cost per model from the prices the run was given), those are shown instead of
recounting the turns: :func:`run_usage` is the one place that decides.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
_PRICE_KEYS = (("price_in", "price_out"), ("price_in_per_mtok", "price_out_per_mtok"), ("price_in_usd_per_mtok", "price_out_usd_per_mtok"))


def run_price(header: dict[str, Any], results: dict[str, Any] | None = None) -> dict[str, float] | None:
    """``{"in_per_mtok", "out_per_mtok"}`` (USD per 1M tokens) when the run carries a price, else None."""
    for block in ((results or {}).get("price"), (results or {}).get("cost"), header.get("settings") or {}, header.get("identity") or {}):
        if not isinstance(block, dict):
            continue
        for key_in, key_out in (("in_per_mtok", "out_per_mtok"), *_PRICE_KEYS):
            p_in, p_out = block.get(key_in), block.get(key_out)
            if _number(p_in) or _number(p_out):
                return {"in_per_mtok": float(p_in or 0.0), "out_per_mtok": float(p_out or 0.0)}
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _tokens(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, dict):
        return None
    out = {k: int(usage[k]) for k in TOKEN_KEYS if isinstance(usage.get(k), int | float) and not isinstance(usage.get(k), bool)}
    if out and "total_tokens" not in out:
        out["total_tokens"] = out.get("prompt_tokens", 0) + out.get("completion_tokens", 0)
    return out or None


def _calls(header: dict[str, Any], rows: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, int] | None]]:
    """``(model, role, tokens)`` for every request the run made: each asked turn, each judge verdict."""
    model = str((header.get("identity") or {}).get("model") or "?")
    calls = []
    for row in rows:
        for turn in row.get("turns") or []:
            if not turn.get("asked", True):
                continue
            served = (turn.get("meta") or {}).get("model") if isinstance(turn.get("meta"), dict) else None
            calls.append((str(served or model), "examinee", _tokens(turn.get("tokens"))))
        verdict = row.get("judge")
        if isinstance(verdict, dict):
            calls.append((str(verdict.get("judge") or "judge"), "judge", _tokens(verdict.get("tokens"))))
    return calls


def _cost(tokens: dict[str, int], price: dict[str, float] | None) -> float | None:
    if price is None:
        return None
    return round(tokens.get("prompt_tokens", 0) / 1e6 * price["in_per_mtok"] + tokens.get("completion_tokens", 0) / 1e6 * price["out_per_mtok"], 6)


def run_usage(header: dict[str, Any], rows: list[dict[str, Any]], results: dict[str, Any] | None = None) -> dict[str, Any]:
    """Requests, tokens and cost per model and in total.

    Returns ``{"per_model": [{"model", "role", "requests", "reported", "prompt_tokens", "completion_tokens",
    "total_tokens", "cost_usd"}], "total": {same without model/role}, "price": run_price(...) | None}``.
    ``cost_usd`` is None without a price; the judge's tokens are priced like the examinee's only when the
    run gives one price for all (it names no per-model prices).
    """
    written = _written_usage(results)
    if written is not None:
        return written
    price = run_price(header, results)
    groups: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: {"requests": 0, "reported": 0, **dict.fromkeys(TOKEN_KEYS, 0)})
    for model, role, tokens in _calls(header, rows):
        block = groups[(model, role)]
        block["requests"] += 1
        if tokens:
            block["reported"] += 1
            for key in TOKEN_KEYS:
                block[key] += tokens.get(key, 0)
    per_model = [{"model": model, "role": role, **block, "cost_usd": _cost(block, price)} for (model, role), block in sorted(groups.items())]
    total = {key: sum(b[key] for b in per_model) for key in ("requests", "reported", *TOKEN_KEYS)}
    total["cost_usd"] = _cost(total, price)
    return {"per_model": per_model, "total": total, "price": price}


def _written_usage(results: dict[str, Any] | None) -> dict[str, Any] | None:
    """``results.json``'s own ``usage`` block (per model: roles, requests, without_usage, tokens, cost_usd) in this module's shape."""
    usage = (results or {}).get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("per_model"), dict):
        return None
    per_model = []
    for model, block in sorted(usage["per_model"].items()):
        tokens = block.get("tokens") or {}
        requests = int(block.get("requests") or 0)
        per_model.append({"model": str(model), "role": ", ".join(block.get("roles") or []), "requests": requests,
                          "reported": requests - int(block.get("without_usage") or 0), **{k: int(tokens.get(k) or 0) for k in TOKEN_KEYS},
                          "cost_usd": block.get("cost_usd")})
    total = {key: sum(b[key] for b in per_model) for key in ("requests", "reported", *TOKEN_KEYS)}
    total["cost_usd"] = usage.get("cost_usd")
    prices = [b.get("price_per_1m_usd") for b in usage["per_model"].values() if isinstance(b.get("price_per_1m_usd"), dict)]
    price = {"in_per_mtok": float(prices[0]["in"]), "out_per_mtok": float(prices[0]["out"])} if len(prices) == 1 else None
    return {"per_model": per_model, "total": total, "price": price}


def sample_tokens(row: dict[str, Any]) -> int:
    """Total tokens the server reported for one sample's turns (0 when none reported)."""
    return sum((_tokens(t.get("tokens")) or {}).get("total_tokens", 0) for t in row.get("turns") or [])
