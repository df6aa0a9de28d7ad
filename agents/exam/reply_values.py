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
# "30 s", "30-second", "72 bpm": a number followed by a unit is not a count
_UNIT_AFTER = re.compile(r"\s*-?\s*(?:ms\b|msec|millisecond|s\b|sec|second|min\b|minute|h\b|hr\b|hour|bpm|%|mv\b|mm\b|hz\b)", re.I)
_RANGE_AFTER = re.compile(rf"\s*(?:to|and|-|\u2013)\s*{_NUM}" + _UNIT_AFTER.pattern, re.I)
#: "2:1 AV block", "3rd-degree", "03:12": a number that names a ratio, an ordinal or a clock time
_NOT_A_COUNT = re.compile(r":\d|(?:st|nd|rd|th)\b", re.I)
_MARKER = re.compile(r"(?:final\s+answer|answer|count|total)\s*(?:is|=|:)\s*", re.I)
_UNIT = r"(?P<u>ms\b|msec\w*|milliseconds?|s\b|secs?\b|seconds?|min\b|mins\b|minutes?|h\b|hrs?\b|hours?)"
_TIME_UNIT = re.compile(rf"(?P<v>{_NUM})\s*{_UNIT}", re.I)
#: bare numbers listed before one with a unit share it: "1028324, 17179240 and 17215495 ms"
_LIST_SEP = r"(?:\s*,\s+(?:and\s+)?|\s+and\s+|\s*;\s*)"  # "138,156" is one number: a list's comma has a space after it
_UNIT_LIST = re.compile(rf"(?P<list>(?:(?<![\w.:]){_NUM}{_LIST_SEP})+)(?P<v>{_NUM})\s*{_UNIT}", re.I)
#: what may join the parts of one duration: "22 hours 39 minutes", "1 h, 5 min", "2 min and 30 s"
_PART_JOIN = re.compile(r"\s*(?:,\s*)?(?:and\s+)?")
_CLOCK = re.compile(r"(?<![\d:.])(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?(?![\d:])")
#: "at 03:12": hours and minutes elapsed (Holter reports give times to the minute)
_CLOCK_HM = re.compile(r"(?<![\d:.])(\d{1,2}):(\d{2})(?![\d:]|\.\d)")
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
    number that is not followed by a unit (``ms``, ``s``, ``30-second``, ``bpm``, ``%`` ...)
    nor by ``to|and|-`` and a number with a unit (a range), so that "In the
    window from 120000 to 130000 ms there are 3 PVCs" reads 3, and that is no
    ratio, ordinal or clock time ("2:1 AV block", "3rd-degree", "03:12");
    thousands separators are read ("138,156 heartbeats"); when there is no
    digit, number words (``three``; ``no``/``none`` = 0).
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
            if _UNIT_AFTER.match(span, match.end()) or _RANGE_AFTER.match(span, match.end()) or _NOT_A_COUNT.match(span, match.end()):
                continue
            candidates.append((match.start(), _to_float(match.group())))
        if not candidates:
            candidates = [(m.start(), float(_WORDS[m.group(1).lower()])) for m in word_re.finditer(span)]
        if candidates:
            return min(candidates)[1]
    return None


def _unit_ms(token: str) -> float:
    unit = token.lower().rstrip("s") or "s"
    return _UNIT_MS[next((k for k in sorted(_UNIT_MS, key=len, reverse=True) if unit.startswith(k)), "ms")]


def _compound(body: str, match: re.Match[str]) -> tuple[float, int]:
    """The time a unit match starts, with the smaller-unit parts that follow it ("22 hours 39 minutes"); (ms, end)."""
    total, unit, end = _to_float(match.group("v")) * _unit_ms(match.group("u")), _unit_ms(match.group("u")), match.end()
    while unit > 1.0:
        join = _PART_JOIN.match(body, end)
        nxt = _TIME_UNIT.match(body, join.end()) if join else None
        if nxt is None or _unit_ms(nxt.group("u")) >= unit:
            break
        if unit <= 1000.0 and join.group().strip():  # "2 s and 500 ms" lists two times; "1 s 500 ms" is one
            break
        unit = _unit_ms(nxt.group("u"))
        total, end = total + _to_float(nxt.group("v")) * unit, nxt.end()
    return total, end


def _clock_times(body: str) -> tuple[list[tuple[int, float]], list[tuple[int, int]]]:
    """``h:mm:ss(.fff)`` and ``h:mm`` times (elapsed from the start) with their spans."""
    found: list[tuple[int, float]] = []
    taken: list[tuple[int, int]] = []
    for match in _CLOCK.finditer(body):
        h, m, s, frac = match.groups()
        found.append((match.start(), ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000.0 + (float(f"0.{frac}") * 1000.0 if frac else 0.0)))
        taken.append(match.span())
    for match in _CLOCK_HM.finditer(body):
        if not any(a <= match.start() < b for a, b in taken) and int(match.group(2)) < 60:
            found.append((match.start(), (int(match.group(1)) * 60 + int(match.group(2))) * 60000.0))
            taken.append(match.span())
    return found, taken


def parse_times_ms(text: Any, *, bare: bool = True) -> list[float]:
    """Every time a reply names, in ms from the recording start, in reply order.

    Read, in this order of precedence:

    * clock times, elapsed from the start: ``00:20:01.500``, ``13:24:05``, ``03:12`` (hours and minutes);
    * times with a unit (``1200 ms``, ``1.2 s``, ``2 min``, ``1 h``); one time may be written in parts of
      falling units, which add up: ``22 hours 39 minutes``, ``1 h 5 min``, ``2 min and 30 s``;
    * a list of bare numbers whose last one has the unit shares it:
      ``1028324, 17179240, 17215495 ms`` (three times in ms);
    * only when there is none of those, bare numbers as ms (the questions ask for ms).

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
    found, taken = _clock_times(body)
    for match in _UNIT_LIST.finditer(body):
        if any(a <= match.start() < b for a, b in taken):
            continue
        unit = _unit_ms(match.group("u"))
        for number in re.finditer(_NUM, match.group("list")):
            found.append((match.start() + number.start(), _to_float(number.group()) * unit))
        taken.append((match.start(), match.start("v")))
    end = 0
    for match in _TIME_UNIT.finditer(body):
        if match.start() < end or any(a <= match.start() < b for a, b in taken):
            continue
        before = body[max(0, match.start() - 1):match.start()]
        if before and (before.isalpha() or before in ".:"):
            continue
        ms, end = _compound(body, match)
        found.append((match.start(), ms))
    if not found and bare:
        for match in re.finditer(_NUM, body):
            before = body[max(0, match.start() - 1):match.start()]
            if before and (before.isalnum() or before == ":"):
                continue
            if _NOT_A_COUNT.match(body, match.end()):  # "No 2:1 AV Block is detected", "3rd-degree": a name, no time
                continue
            found.append((match.start(), _to_float(match.group())))
    return [round(v, 3) for _, v in sorted(found)]


def parse_duration_ms(text: Any) -> float | None:
    """The first duration a text names, in ms: ``22 hours 39 minutes``, ``1 h 5 min``, ``13:24:05``, ``90 s``; or None."""
    times = parse_times_ms(text, bare=False)
    return times[0] if times else None
