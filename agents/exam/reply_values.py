"""Read the values a model's reply gives: a count, times in ms from the recording start.

Never raises on model text: an unreadable reply gives None (a number) or an
empty list (times). ``<think>`` blocks are left out first
(:func:`ecgtrace.agents.exam.parsing.strip_thinking`). Used by QA scoring (:mod:`ecgtrace.agents.exam.qa_families`)
and by the report statistics reader (:mod:`ecgtrace.agents.exam.report_stats`).
"""

from __future__ import annotations

import re
from typing import Any

from ecgtrace.agents.exam.parsing import json_values, strip_thinking

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_WORDS = {"zero": 0, "no": 0, "none": 0, "one": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4,
          "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_UNIT_AFTER = re.compile(r"\s*(?:ms\b|msec|millisecond|s\b|sec|second|min\b|minute|h\b|hr\b|hour|bpm|%|mv\b|mm\b|hz\b)", re.I)
_RANGE_AFTER = re.compile(rf"\s*(?:to|and|-|\u2013)\s*{_NUM}" + _UNIT_AFTER.pattern, re.I)
_MARKER = re.compile(r"(?:final\s+answer|answer|count|total)\s*(?:is|=|:)\s*", re.I)
_TIME_UNIT = re.compile(
    rf"(?P<v>{_NUM})\s*(?P<u>ms\b|msec\w*|milliseconds?|s\b|secs?\b|seconds?|min\b|mins\b|minutes?|h\b|hrs?\b|hours?)", re.I)
_CLOCK = re.compile(r"(?<![\d:.])(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?(?![\d:])")
_UNIT_MS = {"ms": 1.0, "msec": 1.0, "millisecond": 1.0, "s": 1000.0, "sec": 1000.0, "second": 1000.0,
            "min": 60000.0, "minute": 60000.0, "h": 3.6e6, "hr": 3.6e6, "hour": 3.6e6}


def _to_float(token: str) -> float:
    return float(token.replace(",", ""))


def _json_answer(text: str) -> Any:
    for obj in json_values(text, opening="{"):
        if isinstance(obj, dict):
            for key in ("answer", "count", "value", "time_ms", "times_ms", "timestamps_ms"):
                if key in obj:
                    return obj[key]
    return None


def parse_number(text: Any) -> float | None:
    """The count a reply gives, or None.

    Order: a JSON ``{"answer": n}``; a marker (``Answer: 3``); else the first
    number that is not followed by a unit (``ms``, ``s``, ``bpm``, ``%`` ...)
    nor by ``to|and|-`` and a number with a unit (a range), so that "In the
    window from 120000 to 130000 ms there are 3 PVCs" reads 3; when there is
    no digit, number words (``three``; ``no``/``none`` = 0).
    """
    if not isinstance(text, str):
        return None
    body = strip_thinking(text)
    value = _json_answer(body)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        body = value
    marker = _MARKER.search(body)
    spans = [body[marker.end():], body] if marker else [body]
    word_re = re.compile(r"\b(" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b", re.I)
    for span in spans:
        candidates: list[tuple[int, float]] = []
        for match in re.finditer(_NUM, span):
            before = span[max(0, match.start() - 1):match.start()]
            if before and (before.isalnum() or before in ":."):
                continue
            if _UNIT_AFTER.match(span, match.end()) or _RANGE_AFTER.match(span, match.end()):
                continue
            candidates.append((match.start(), _to_float(match.group())))
        if not candidates:
            candidates = [(m.start(), float(_WORDS[m.group(1).lower()])) for m in word_re.finditer(span)]
        if candidates:
            return min(candidates)[1]
    return None


def parse_times_ms(text: Any, *, bare: bool = True) -> list[float]:
    """Every time a reply names, in ms from the recording start, in reply order.

    Times with a unit (``1200 ms``, ``1.2 s``, ``2 min``, ``1 h``) and clock
    times (``00:20:01.500`` = elapsed h:m:s from the start) are read; only when
    there is none are bare numbers read as ms (the questions ask for ms).
    "none" / "no events" gives an empty list. A JSON list under ``answer`` is
    read as ms. ``bare=False`` never reads unitless numbers.
    """
    if not isinstance(text, str):
        return []
    body = strip_thinking(text)
    value = _json_answer(body)
    if isinstance(value, list) and all(isinstance(v, int | float) for v in value):
        return [float(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [float(value)]
    if isinstance(value, str):
        body = value
    found: list[tuple[int, float]] = []
    taken: list[tuple[int, int]] = []
    for match in _CLOCK.finditer(body):
        h, m, s, frac = match.groups()
        ms = ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000.0 + (float(f"0.{frac}") * 1000.0 if frac else 0.0)
        found.append((match.start(), ms))
        taken.append(match.span())
    for match in _TIME_UNIT.finditer(body):
        if any(a <= match.start() < b for a, b in taken):
            continue
        unit = match.group("u").lower().rstrip("s") or "s"
        unit = next((k for k in sorted(_UNIT_MS, key=len, reverse=True) if unit.startswith(k)), "ms")
        found.append((match.start(), _to_float(match.group("v")) * _UNIT_MS[unit]))
    if not found and bare:
        for match in re.finditer(_NUM, body):
            before = body[max(0, match.start() - 1):match.start()]
            if before and before.isalnum():
                continue
            found.append((match.start(), _to_float(match.group())))
    return [round(v, 3) for _, v in sorted(found)]
