"""Tolerant parsing of a model's answer to a closed question.

:func:`parse_answer` never raises on model text. It returns a
:class:`ParseResult` whose ``value`` is the chosen option text (or, for
multi-select questions, the list of chosen option texts in option order), or
``ok=False`` with the ``reason`` the text could not be read.

Strategies, first success wins:

1. ``<think>…</think>`` blocks are dropped.
2. JSON anywhere in the text: ``{"answer": "B"}``, ``{"answer": ["I", "V1"]}``,
   ``{"answers": …}``, or a bare JSON list/string.
3. An explicit marker: ``Answer: B``, ``Final answer: (B) No``, ``The answer is B``.
4. Bold text ``**…**`` (the last bold span that resolves).
5. The whole reply: ``B``, ``(B)``, ``B.``, ``B) No``, ``No``, ``A, C``, ``I and V1``,
   ``D is correct``; a letter whose text names the option's values in other
   words (``D. 1028324, 17179240 ms`` for ``1028324 ms, 17179240 ms``).
6. A reply that opens with Yes or No, for a Yes/No question ("Yes, the rhythm
   pattern supports the presence of ...").
7. Exactly one option text mentioned in the reply (longest match wins when
   one option contains another, e.g. "Further findings …" vs "No").

A token resolves to an option by exact option text first (case-sensitive,
then case-insensitive, ignoring surrounding punctuation), then by option
letter (A = first option). Text wins over letters so that a lead named ``I``
is never read as the ninth option; examinees that answer with option text are
therefore never ambiguous. With ``letters=False`` (questions shown without
letters, ERB's style) a letter is not an answer: a bare ``"E"`` is not read as
the fifth option, as ERB's own scorer counts it wrong.
"""

from __future__ import annotations

import contextvars
import json
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

LETTERS = string.ascii_uppercase
#: Whether the parse under way reads option letters (set by :func:`parse_answer` for its call only).
_READ_LETTERS: contextvars.ContextVar[bool] = contextvars.ContextVar("read_letters", default=True)


@dataclass(frozen=True)
class ParseResult:
    """``value``: option text, list of option texts (multi), or None when ``ok`` is False."""

    value: str | list[str] | None
    ok: bool
    reason: str
    method: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "ok": self.ok, "reason": self.reason, "method": self.method}


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_MARKER = re.compile(
    r"(?:final\s+answer|answer|the\s+answer\s+is|answer\s+is|option|choice|selected?)\s*(?:is)?\s*[:=\-]?\s*(.+)",
    re.I,
)
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__", re.S)
_LETTER_PREFIX = re.compile(r"^\(?([A-Za-z])\)?(?:[.):\]]|\s*$|\s+[-–:]?\s*)")
_SPLIT = re.compile(r"\s*(?:,|;|/|\band\b|&|\n)\s*", re.I)
_STRIP = " \t\r\n.,;:!?\"'`*()[]{}<>"
_YES_NO_OPENING = re.compile(r"^\W*(yes|no)\b", re.I)


def _clean(text: str) -> str:
    return text.strip().strip(_STRIP).strip()


def _resolve_token(token: str, options: list[str]) -> str | None:
    """One token -> one option text, by text first and letter second."""
    raw = token.strip()
    if not raw:
        return None
    for candidate in (raw, raw.strip(" \t\r\n.,;:!?\"'`*"), _clean(raw)):
        if candidate in options:
            return candidate
    lowered = {o.lower(): o for o in options}
    for candidate in (raw.lower(), _clean(raw).lower()):
        if candidate in lowered:
            return lowered[candidate]
    # "B) No", "(B) No", "B. No", "B" -> letter; any text after it must be that option's text
    match = _LETTER_PREFIX.match(raw.strip("*` ")) if _READ_LETTERS.get() else None
    if match:
        letter = match.group(1).upper()
        index = LETTERS.find(letter)
        rest = _clean(raw.strip("*` ")[match.end():])
        if 0 <= index < len(options) and (letter == match.group(1) or not rest):
            chosen = options[index]
            if not rest or rest.lower() == chosen.lower() or same_values(rest, chosen) or _VERDICT.fullmatch(rest):
                return chosen
    # a clear prefix of exactly one option ("Further findings are required.")
    cleaned = _clean(raw).lower()
    if len(cleaned) >= 8:
        starts = [o for o in options if o.lower().startswith(cleaned)]
        if len(starts) == 1:
            return starts[0]
    return None


_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?![\d])|\d+(?:\.\d+)?")
#: Words a letter's text may add or leave out and still name the same values ("D. 1028324, 17179240 ms" for "1028324 ms, 17179240 ms").
_VALUE_WORDS = frozenset({"ms", "s", "sec", "secs", "second", "seconds", "millisecond", "milliseconds", "bpm", "and", "at"})
#: "D is correct", "D is the best answer": a letter and a verdict on it.
_VERDICT = re.compile(r"(?:is\s+)?(?:the\s+)?(?:correct|right|best)(?:\s+(?:answer|option|choice))?", re.I)


def same_values(text: str, option: str) -> bool:
    """Whether ``text`` names the same numbers as ``option``, in order, and no word the option lacks (beyond units)."""
    numbers = lambda t: [n.replace(",", "") for n in _NUMBER.findall(t)]  # noqa: E731
    words = lambda t: set(re.findall(r"[a-z]+", _NUMBER.sub(" ", t.lower())))  # noqa: E731
    got = numbers(text)
    return bool(got) and got == numbers(option) and words(text) <= words(option) | _VALUE_WORDS


def _contradiction(text: str, options: list[str]) -> str | None:
    """'A. No' names option A by letter and option B by text: report it instead of guessing."""
    match = _LETTER_PREFIX.match(text.strip("*` ")) if _READ_LETTERS.get() else None
    if not match or match.group(1) != match.group(1).upper():
        return None
    index = LETTERS.find(match.group(1))
    rest = _clean(text.strip("*` ")[match.end():])
    if not (0 <= index < len(options)) or not rest:
        return None
    named = [o for o in options if o.lower() == rest.lower()]
    if named and named[0] != options[index]:
        return f"letter {match.group(1)} ({options[index]!r}) contradicts option text {named[0]!r}"
    return None


def _resolve_value(value: Any, options: list[str], multi: bool) -> str | list[str] | None:
    """A JSON value or a span of text -> answer, or None."""
    if isinstance(value, list):
        picked = [_resolve_token(str(v), options) for v in value]
        if not picked or any(p is None for p in picked):
            return None
        return _ordered(picked, options) if multi else (picked[0] if len(set(picked)) == 1 else None)
    if not isinstance(value, str | int | float):
        return None
    text = str(value)
    single = _resolve_token(text, options)
    if single is not None:
        return [single] if multi else single
    if multi:
        parts = [p for p in _SPLIT.split(text) if _clean(p)]
        if len(parts) > 1:
            picked = [_resolve_token(p, options) for p in parts]
            if all(p is not None for p in picked):
                return _ordered(picked, options)
    return None


def _ordered(picked: list[str | None], options: list[str]) -> list[str]:
    chosen = set(picked)
    return [o for o in options if o in chosen]


def json_values(text: str, *, opening: str = "{[") -> Iterator[Any]:
    """Every JSON value embedded in free text, in the order of its opening bracket.

    Model answers wrap JSON in prose or code fences; each ``{`` (or ``[``) is tried
    as the start of a value, so a valid object after an invalid one is still found.
    """
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char in opening:
            try:
                yield decoder.raw_decode(text, start)[0]
            except ValueError:
                continue


def _json_candidates(text: str) -> list[Any]:
    return list(json_values(text))


def _from_json(text: str, options: list[str], multi: bool) -> str | list[str] | None:
    for obj in _json_candidates(text):
        if isinstance(obj, dict):
            for key in ("answer", "answers", "final_answer", "choice", "option", "options", "leads", "selected"):
                if key in obj:
                    value = _resolve_value(obj[key], options, multi)
                    if value is not None:
                        return value
        elif isinstance(obj, list):
            value = _resolve_value(obj, options, multi)
            if value is not None:
                return value
    return None


def _mentioned(text: str, options: list[str], multi: bool) -> str | list[str] | None:
    """Options named in free text; a mention inside a longer mention ("II" in "III") does not count."""
    lowered = text.lower()
    spans: list[tuple[int, int, str]] = []
    for option in options:
        pattern = r"(?<![\w])" + re.escape(option.lower()) + r"(?![\w])"
        spans += [(m.start(), m.end(), option) for m in re.finditer(pattern, lowered)]
    hits = {o for (a, b, o) in spans if not any((c <= a and b <= d) and (d - c) > (b - a) for (c, d, _) in spans)}
    if multi and hits:
        return _ordered(list(hits), options)
    return next(iter(hits)) if len(hits) == 1 else None


def parse_answer(text: Any, options: list[str], multi: bool = False, *, letters: bool = True) -> ParseResult:
    """Read the option(s) a model chose; never raises.

    Args:
        text: the model's reply (anything; non-strings are recorded as unparseable).
        options: the option texts in the order they were shown (A, B, C, …).
        multi: True for multi-select questions (answer is a list, scored as a set).
        letters: the options were shown lettered, so a letter names one (False: only option texts count).
    """
    token = _READ_LETTERS.set(bool(letters))
    try:
        return _parse(text, list(options), multi)
    except Exception as exc:  # pragma: no cover - defensive: model text must never crash a run
        return ParseResult(None, False, f"parser error: {type(exc).__name__}: {exc}", "error")
    finally:
        _READ_LETTERS.reset(token)


def strip_thinking(text: str) -> str:
    """``text`` without its ``<think>…</think>`` blocks; after an unterminated ``<think>``, only what follows it.

    The one reader of reasoning traces that models write into their answer:
    closed answers, open answers, reports and judge verdicts all go through it.
    """
    body = _THINK.sub(" ", text)
    if "<think>" in body.lower():  # unterminated thinking: keep what follows the last tag
        body = body[body.lower().rfind("<think>") + 7:]
    return body


def _parse(text: Any, options: list[str], multi: bool) -> ParseResult:
    if text is None:
        return ParseResult(None, False, "no reply", "none")
    if not isinstance(text, str):
        return ParseResult(None, False, f"reply is {type(text).__name__}, not text", "none")
    body = strip_thinking(text).strip()
    if not body:
        return ParseResult(None, False, "empty reply", "none")

    value = _from_json(body, options, multi)
    if value is not None:
        return ParseResult(value, True, "", "json")
    lines = [line for line in body.splitlines() if line.strip()]
    for line in reversed(lines):
        match = _MARKER.search(line)
        if match:
            value = _resolve_value(_clean_marker(match.group(1)), options, multi)
            if value is not None:
                return ParseResult(value, True, "", "marker")
    for bold in reversed(_BOLD.findall(body)):
        span = bold[0] or bold[1]
        value = _resolve_value(span, options, multi)
        if value is None:
            match = _MARKER.search(span)
            value = _resolve_value(_clean_marker(match.group(1)), options, multi) if match else None
        if value is not None:
            return ParseResult(value, True, "", "bold")
    # an option may itself hold an asterisk ("mV*s"): try the text as written before unbolding it
    value = _resolve_value(body, options, multi) or _resolve_value(body.replace("*", ""), options, multi)
    if value is not None:
        return ParseResult(value, True, "", "whole")
    conflict = _contradiction(body, options)
    if conflict:
        return ParseResult(None, False, conflict, "none")
    opening = _YES_NO_OPENING.match(body)
    if opening and not multi:  # "Yes, the rhythm pattern supports the presence of ...": the first word answers, unless the other appears
        chosen = next((o for o in options if o.lower() == opening.group(1).lower()), None)
        other = "no" if opening.group(1).lower() == "yes" else "yes"
        if chosen is not None and not re.search(rf"\b{other}\b", body, re.I):
            return ParseResult(chosen, True, "", "opening")
    value = _mentioned(body, options, multi) or _mentioned(body.replace("*", ""), options, multi)
    if value is not None:
        return ParseResult(value, True, "", "mention")
    preview = body if len(body) <= 80 else body[:77] + "..."
    return ParseResult(None, False, f"no option recognised in {preview!r}", "none")


def _clean_marker(span: str) -> str:
    span = span.replace("*", "").strip()
    # "B. No — because ..." : keep up to a sentence break after the option
    return re.split(r"\s+(?:because|since|as)\s+|\s[-–—]\s", span, maxsplit=1)[0].strip()


def is_correct(value: str | list[str] | None, answer: str | list[str], multi: bool = False) -> bool:
    """Exact match for single answers; exact set match for multi-select."""
    if value is None:
        return False
    if multi:
        got = set(value) if isinstance(value, list) else {value}
        want = set(answer) if isinstance(answer, list) else {answer}
        return got == want
    return value == answer
