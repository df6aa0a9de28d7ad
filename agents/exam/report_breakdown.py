"""PAC/PVC breakdowns in a report's words: "PVC breakdown: 40 single, 1 paired, 2 in runs, 1 bigeminy and 0 trigeminy episodes".

A breakdown clause names its ectopy class before the word ``breakdown``
("PAC breakdown:", "Ventricular ectopy breakdown:") and lists counts of
episodes: single (isolated) beats, pairs (couplets), runs, bigeminy,
trigeminy and, for PACs, non-conducted ones. Its counts go to the fields of
:data:`ecgtrace.agents.holter.report.BREAKDOWN_FIELDS` (ventricular pairs,
bigeminy and trigeminy to ``couplets``, ``bigeminy_episodes`` and
``trigeminy_episodes``), and the report reader reads nothing else from it, so
"2 in runs" of a PVC breakdown is never taken for the total of runs.
"""

from __future__ import annotations

import re

from ecgtrace.agents.exam.findings_text import PAC, PVC

_COUNT = r"(?<![\d.,])(?P<v>\d{1,3}(?:,\d{3})+|\d+|no|zero|one|two|three|four|five|six|seven|eight|nine|ten)(?![\d.])"
_WORD = {"no": 0, "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_CLASS = re.compile(rf"^\W*(?:the\s+)?(?P<cls>{PVC}|{PAC}|ventricular|supraventricular|atrial)(?:\s+ectopy)?\s+breakdown\b", re.I)
_PART = r"(?P<w>single|isolated|paired|pairs?|couplets?|(?:in\s+)?runs?|bigemin\w*|trigemin\w*|non-?\s*conducted|blocked)"
_ITEMS = (re.compile(rf"{_COUNT}\s+{_PART}", re.I), re.compile(rf"{_PART}\s*[:=]\s*{_COUNT}", re.I))
#: ``{class: {part: field}}``
FIELDS: dict[str, dict[str, str]] = {
    "pvc": {"single": "pvc_single", "pair": "couplets", "run": "pvc_runs", "bigeminy": "bigeminy_episodes", "trigeminy": "trigeminy_episodes"},
    "pac": {"single": "pac_single", "pair": "pac_pairs", "run": "pac_runs", "bigeminy": "pac_bigeminy", "trigeminy": "pac_trigeminy",
            "nonconducted": "pac_nonconducted"},
}


def breakdown_class(clause: str) -> str | None:
    """``pvc`` or ``pac`` when ``clause`` is a breakdown clause of that class, else None."""
    match = _CLASS.search(clause)
    if not match:
        return None
    return "pvc" if re.fullmatch(PVC + r"|ventricular", match.group("cls"), re.I) else "pac"


def _part(word: str) -> str:
    word = word.lower()
    if word.startswith(("single", "isolated")):
        return "single"
    if word.startswith(("pair", "couplet")):
        return "pair"
    if "run" in word:
        return "run"
    if word.startswith(("non", "blocked")):
        return "nonconducted"
    return "bigeminy" if word.startswith("bigemin") else "trigeminy"


def breakdown_counts(clause: str) -> dict[str, float]:
    """The breakdown fields one clause states (empty unless it is a breakdown clause)."""
    cls = breakdown_class(clause)
    if cls is None:
        return {}
    out: dict[str, float] = {}
    for pattern in _ITEMS:
        for match in pattern.finditer(clause):
            field = FIELDS[cls].get(_part(match.group("w")))
            token = match.group("v").lower()
            if field is not None and field not in out:
                out[field] = float(_WORD[token]) if token in _WORD else float(token.replace(",", ""))
    return out
