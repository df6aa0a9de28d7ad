"""Read the statistics out of a Holter report written by a model, and check them.

:func:`extract_statistics` reads the fields of
:data:`ecgtrace.agents.holter.report.REPORT_FIELDS` from free text or JSON,
tolerant to the ways people write them::

    "mean HR 72 bpm", "average heart rate of 72 bpm", "Heart rate mean 72 bpm, maximum 131 bpm"
    "The maximum recorded heart rate was 135 bpm", "The fastest recorded rate was 191 bpm"
    "PVCs: 123 (0.5%)", "123 PVCs (0.5%)", "Ventricular ectopy: 123 beats (0.5%)", "PVC burden 0.5%"
    "max heart rate of 131 bpm at 14:02:03", "minimum HR 41 bpm at 03:12" (the time is kept as
    max_hr_t_ms / min_hr_t_ms, elapsed h:m:s or h:mm)
    "3.2% of the time above 100 bpm", "HR < 60 bpm: 10.1%", "no pauses", "two couplets"
    "The recording lasted 22 hours 39 minutes", "138,156 heartbeats"
    "PVC breakdown: 40 single, 1 paired, 2 in runs, 1 bigeminy and 0 trigeminy episodes"
    (:mod:`ecgtrace.agents.exam.report_breakdown`)

A JSON object in the reply (``report_statistics`` asks for one) is read
first; fields it lacks fall back to the text rules. Each field is compared to
the truth within :func:`field_tolerance`:

* ``duration_s``: max(60 s, 1 %); ``total_beats``: max(10, 2 %);
* heart rates (``*_hr_bpm``): max(5 bpm, 10 %), the ANSI/AAMI EC13 heart-rate
  accuracy requirement;
* ``pct_time_hr_gt_100`` / ``pct_time_hr_lt_60``: 2 percentage points;
* ``pac_total`` / ``pvc_total``: max(2, 5 %); ``pac_pct`` / ``pvc_pct``:
  max(0.1 points, 10 %);
* episode counts (couplets, runs, bigeminy, trigeminy, pauses, the PAC/PVC
  breakdowns): 10 % rounded down, so exact below 10;
* ``rhythm``: the set of rhythm findings named (AF, atrial flutter, atrial
  tachycardia, first/second/third-degree AV block, junctional and ventricular
  escape rhythms, sinus tachycardia, sinus bradycardia) equals the truth's.

**Hallucinations** are findings the model asserts (named, not negated, and
not with a count of 0) that the truth does not hold: a rhythm finding not in
the true rhythm, or couplets/runs/VT/SVT/bigeminy/trigeminy/pauses/PACs/PVCs/
non-conducted PACs when the true count is 0 (a count the truth does not hold,
such as a breakdown a JSON report lacks, is never a hallucination).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ecgtrace.agents.exam.findings_text import PAC, PVC, asserted, clauses, label_verdict, normalize
from ecgtrace.agents.exam.parsing import json_values
from ecgtrace.agents.exam.report_breakdown import breakdown_class, breakdown_counts
from ecgtrace.agents.exam.reply_values import parse_duration_ms, parse_times_ms
from ecgtrace.agents.holter.report import REPORT_FIELDS

__all__ = ["claimed_findings", "clauses", "extract_statistics", "field_tolerance", "label_verdict", "rhythm_findings", "score_report",
           "truth_findings", "truth_statistics"]

NUM = r"(?<![\d.,])(?P<v>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|no|zero|one|two|three|four|five|six|seven|eight|nine|ten)(?!\.?\d)"
_WORD = {"no": 0, "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_NOT_UNIT = r"(?!\s*(?:%|bpm|ms\b|msec|s\b|sec|mv\b|hours?\b|h\b|min))"
_SKIP_WORD = r"(?:(?!ms\b|s\b|sec|bpm|mv\b|hours?\b|h\b|min|and\b|or\b)[a-z]+\s+)"
COUNT_KW: dict[str, str] = {
    "pvc_total": PVC,
    "pac_total": PAC,
    "couplets": r"(?:ventricular\s+)?couplets?",
    "runs": r"(?:runs?(?:\s+of\s+(?:vt|svt|nsvt|(?:supra)?ventricular\s+tachycardia))?|(?:vt|svt|nsvt)\s+(?:runs?|episodes?))",
    "bigeminy_episodes": r"(?:episodes?\s+of\s+|of\s+)?(?:ventricular\s+)?bigemin(?:y|al)(?:\s+episodes?)?",
    "trigeminy_episodes": r"(?:episodes?\s+of\s+|of\s+)?(?:ventricular\s+)?trigemin(?:y|al)(?:\s+episodes?)?",
    "pauses": r"(?:sinus\s+)?pauses?",
}
GT100 = r"(?:>|above|over|greater\s+than|more\s+than|exceed(?:ing|ed|s)?)\s*100"
LT60 = r"(?:<|below|under|less\s+than|lower\s+than)\s*60"
RHYTHM_TERMS: dict[str, str] = {
    "af": r"atrial\s+fibrillation|\ba-?fib\b|\baf\b",
    "atrial_flutter": r"atrial\s+flutter",
    "atrial_tachycardia": r"(?<!supraventricular\s)atrial\s+tachycardia",
    "avb1": r"first[-\s]degree\s+(?:av\s+|atrioventricular\s+|heart\s+)?block|1st[-\s]degree\s+(?:av\s+)?block|\bavb1\b",
    "avb2": r"second[-\s]degree\s+(?:av\s+|atrioventricular\s+|heart\s+)?block|mobitz|wenckebach|2\s*:\s*1\s+(?:av\s+|atrioventricular\s+)?block",
    "avb3": r"third[-\s]degree\s+(?:av\s+|atrioventricular\s+|heart\s+)?block|complete\s+(?:heart|av)\s+block",
    "junctional_rhythm": r"(?:junctional|nodal)\s+(?:escape\s+)?rhythm",
    "ventricular_escape_rhythm": r"ventricular\s+escape\s+rhythm|(?<!accelerated\s)idioventricular\s+rhythm",
    "sinus_tachycardia": r"sinus\s+tachycardia",
    "sinus_bradycardia": r"sinus\s+bradycardia",
}
#: Findings counted by a field: asserting them when the true count is 0 is a hallucination.
COUNT_TERMS: dict[str, tuple[str, str]] = {
    "vt": (r"(?<!supra)ventricular\s+tachycardia|\bvt\b|\bnsvt\b", "runs"),
    "svt": (r"supraventricular\s+tachycardia|\bp?svt\b", "runs"),
    "couplet": (r"couplets?", "couplets"),
    "bigeminy": (r"bigemin", "bigeminy_episodes"),
    "trigeminy": (r"trigemin", "trigeminy_episodes"),
    "pause": (r"\bpauses?\b|sinus\s+arrest", "pauses"),
    "pvc": (PVC, "pvc_total"),
    "pac": (PAC, "pac_total"),
    "nonconducted_pac": (r"(?:non-?\s*conducted|blocked)\s+(?:pacs?|premature\s+atrial)", "pac_nonconducted"),
}
NUMERIC_FIELDS = tuple(f for f in REPORT_FIELDS if f != "rhythm")
_ALIASES = {"mean_hr": "mean_hr_bpm", "avg_hr_bpm": "mean_hr_bpm", "average_hr_bpm": "mean_hr_bpm", "max_hr": "max_hr_bpm",
            "min_hr": "min_hr_bpm", "beats": "total_beats", "duration": "duration_s", "pvcs": "pvc_total", "pacs": "pac_total",
            "bigeminy": "bigeminy_episodes", "trigeminy": "trigeminy_episodes"}


def _num(token: str) -> float:
    token = token.lower()
    return float(_WORD[token]) if token in _WORD else float(token.replace(",", ""))


_normalize = normalize


def _count_patterns(kw: str) -> list[re.Pattern[str]]:
    return [re.compile(p, re.I) for p in (
        rf"\b{kw}\s*(?:beats?\s*)?(?:total|count|number|totals)?\s*(?:[:=]|were|was|is|are|of|totall?ing|numbered)?\s*(?:of\s+)?{NUM}{_NOT_UNIT}",
        rf"{NUM}\s+(?:total\s+|isolated\s+|single\s+)?{_SKIP_WORD}{{0,2}}{kw}\b",
    )]


_PATTERNS: dict[str, list[re.Pattern[str]]] = {f: _count_patterns(kw) for f, kw in COUNT_KW.items()}
for _field, _kw in (("pvc_pct", PVC), ("pac_pct", PAC)):
    _PATTERNS[_field] = [re.compile(p, re.I) for p in (
        rf"\b{_kw}\b[^%;\n]{{0,40}}?\(\s*{NUM}\s*%",
        rf"\b{_kw}\s+(?:burden|percentage|pct|percent|%)\s*(?:[:=]|was|is|of)?\s*(?:of\s+)?{NUM}",
        rf"{NUM}\s*%\s*(?:of\s+(?:all\s+|total\s+)?(?:beats|qrs\s+complexes|heartbeats)\s*)?(?:were\s+|are\s+)?{_kw}",
        rf"\b{_kw}\b[^%;\n]{{0,40}}?{NUM}\s*%",
    )]
# "The maximum recorded heart rate was 135 bpm", "The fastest recorded rate was 191 bpm", "mean heart rate over the recording was 72 bpm"
_HR_QUALIFIER = r"(?:\s+(?:recorded|observed|measured|detected|documented|instantaneous|sinus|overall))*"
_HR_SPAN = r"(?:\s+(?:during|over|across|throughout|for)\s+(?:the\s+)?(?:whole\s+|entire\s+)?(?:recording|monitoring|period|study))?"
_HR_TAIL = (rf"{_HR_QUALIFIER}\s*(?:heart\s*rate|hr|rate|ventricular\s+rate)?{_HR_SPAN}\s*(?:was|of|is|=|:|reached|at)?\s*(?:of\s+)?"
            rf"{NUM}(?!\s*(?:%|ms\b|s\b|sec|mv))")
_PATTERNS["mean_hr_bpm"] = [re.compile(p, re.I) for p in (rf"\b(?:mean|average|avg)\.?{_HR_TAIL}", rf"(?:averag\w*|mean\s+of)\s+{NUM}\s*bpm", rf"{NUM}\s*bpm\s+(?:on\s+)?average")]
_PATTERNS["max_hr_bpm"] = [re.compile(rf"\b(?:max(?:imum|imal)?|highest|peak|fastest)\.?{_HR_TAIL}", re.I)]
_PATTERNS["min_hr_bpm"] = [re.compile(rf"\b(?:min(?:imum|imal)?|lowest|slowest)\.?{_HR_TAIL}", re.I)]
_PATTERNS["pct_time_hr_gt_100"] = [re.compile(rf"{NUM}\s*%[^%;,\n]{{0,40}}?{GT100}", re.I), re.compile(rf"{GT100}\s*(?:bpm)?[^%\d;\n]{{0,30}}?{NUM}\s*%", re.I)]
_PATTERNS["pct_time_hr_lt_60"] = [re.compile(rf"{NUM}\s*%[^%;,\n]{{0,40}}?{LT60}", re.I), re.compile(rf"{LT60}\s*(?:bpm)?[^%\d;\n]{{0,30}}?{NUM}\s*%", re.I)]
_PATTERNS["total_beats"] = [re.compile(p, re.I) for p in (
    rf"\btotal\s+(?:of\s+)?(?:number\s+of\s+)?(?:beats|heartbeats|qrs\s+complexes)?\s*(?:was|were|is|=|:)?\s*(?:of\s+)?{NUM}{_NOT_UNIT}",
    rf"\b(?:beats|heartbeats|qrs\s+complexes)\s*(?:total|count)?\s*[:=]\s*{NUM}",
    rf"{NUM}\s+(?:total\s+)?(?:beats|heartbeats|qrs\s+complexes)\b(?!\s*\()",
)]
for _field, _kw in (("pvc_single", PVC), ("pac_single", PAC)):
    _PATTERNS[_field] = [re.compile(rf"{NUM}\s+single\s+{_kw}\b", re.I), re.compile(rf"\bsingle\s+{_kw}\s*[:=]\s*{NUM}", re.I)]
_PATTERNS["pac_nonconducted"] = [re.compile(rf"{NUM}\s+(?:non-?\s*conducted|blocked)\s+{PAC}\b", re.I)]
_HR_RANGE = re.compile(rf"(?:heart\s*rate|hr)[^.;\n]{{0,20}}?(?:ranged|range|ranging|varied|varying)\s*(?:from|between)?\s*{NUM.replace('<v>', '<lo>')}\s*(?:bpm)?\s*(?:to|-|and)\s*{NUM.replace('<v>', '<hi>')}", re.I)
_DURATION = re.compile(r"\b(?:duration|recorded|recording|monitor(?:ing|ed)|length|analy[sz]ed)\b", re.I)
_TIME_PART = re.compile(r"\d+(?:\.\d+)?\s*(?:h\b|hours?|hrs?|min\b|mins?\b|minutes?|s\b|secs?\b|seconds?)", re.I)
#: what may stand between a duration and the word it belongs to: "24 hours of Holter recording", "22 hours 39 minutes recorded"
_DURATION_GAP = re.compile(r"\s*(?:of\s+)?(?:(?:holter|ecg|ambulatory|continuous)\s+)*", re.I)
_RHYTHM_FIELD = re.compile(r"\b(?:underlying\s+|dominant\s+|predominant\s+)?rhythm\s*(?:[:=]|was|is)\s*(?P<r>[^\n;]+)", re.I)
_NO_LIST = re.compile(r"\b(?:no|without|absence\s+of)\s+((?:(?!\bbut\b|\bwith\b|\balthough\b|\bexcept\b)[^.;\n\d])+)", re.I)
_TIME_AFTER = re.compile(r"^\s*(?:bpm|beats\s+per\s+minute)?\s*\)?\s*,?\s*(?:at|@|occurring\s+at|recorded\s+at|reached\s+at)\s*", re.I)


#: "exceeded 100 bpm for 8% of the time and was under 60 bpm for 4%": a percentage belongs to the nearer threshold.
_OTHER_THRESHOLD = {"pct_time_hr_lt_60": (re.compile(rf"{GT100}(?P<gap>\s*(?:bpm)?[^%\d;\n]{{0,30}}?)$", re.I), re.compile(LT60, re.I)),
                    "pct_time_hr_gt_100": (re.compile(rf"{LT60}(?P<gap>\s*(?:bpm)?[^%\d;\n]{{0,30}}?)$", re.I), re.compile(GT100, re.I))}


def _search(field: str, pattern: re.Pattern[str], clause: str) -> re.Match[str] | None:
    if field not in _OTHER_THRESHOLD:
        return pattern.search(clause)
    other, own = _OTHER_THRESHOLD[field]
    for match in pattern.finditer(clause):
        before = other.search(clause[:match.start("v")])
        after = own.search(clause, match.end("v"))
        if before is None or after is None or after.start() < match.end("v") or after.start() - match.end("v") <= len(before.group("gap")):
            return match
    return None


def _first(field: str, parts: list[str]) -> tuple[float, re.Match[str], str] | None:
    for pattern in _PATTERNS[field]:
        for clause in parts:
            if field.startswith(("mean_hr", "max_hr", "min_hr")) and not re.search(r"heart\s*rate|\bhr\b|bpm|\brate\b", clause, re.I):
                continue
            if field == "total_beats" and re.search(rf"\b(?:{PVC}|{PAC})\b|ectopy|ectopic", clause, re.I) and pattern is _PATTERNS[field][2]:
                continue
            match = _search(field, pattern, clause)
            if match:
                return _num(match.group("v")), match, clause
    return None


def _json_stats(text: str) -> dict[str, Any]:
    for obj in json_values(text, opening="{"):
        if not isinstance(obj, dict):
            continue
        out: dict[str, Any] = {}
        for key, value in obj.items():
            name = re.sub(r"[^a-z0-9]+", "_", str(key).lower()).strip("_")
            name = _ALIASES.get(name, name)
            if name == "rhythm" and isinstance(value, str):
                out["rhythm"] = value
            elif name in NUMERIC_FIELDS:
                if isinstance(value, int | float) and not isinstance(value, bool):
                    out[name] = float(value)
                elif isinstance(value, str) and re.match(r"\s*\d", value):
                    out[name] = float(re.match(r"\s*([\d,]*\.?\d+)", value).group(1).replace(",", ""))
        if out:
            return out
    return {}


def _hr_times(out: dict[str, Any], field: str, hit: tuple[float, re.Match[str], str]) -> None:
    """The time that follows a heart-rate extremum ("max 131 bpm at 14:02:03") as ``max_hr_t_ms``/``min_hr_t_ms``."""
    rest = hit[2][hit[1].end():]
    lead = _TIME_AFTER.match(rest)
    if lead:
        times = parse_times_ms(rest[lead.end():lead.end() + 30])
        if times:
            out[field.replace("_bpm", "_t_ms")] = times[0]


def _duration_s(parts: list[str]) -> float | None:
    """The recording's duration: a time after a duration word ("lasted 22 hours 39 minutes"), or right before one ("24 hours of recording")."""
    for clause in parts:
        found = _DURATION.search(clause)
        if not found:
            continue
        after = parse_duration_ms(clause[found.end():found.end() + 60])
        if after is not None:
            return round(after / 1000.0, 3)
        before = list(_TIME_PART.finditer(clause[:found.start()]))
        if before and _DURATION_GAP.fullmatch(clause[before[-1].end():found.start()]):
            start = before[0].start() if len(before) > 1 else before[-1].start()
            value = parse_duration_ms(clause[start:found.start()])
            if value is not None:
                return round(value / 1000.0, 3)
    return None


def extract_statistics(text: str) -> dict[str, Any]:
    """Every field found in ``text``: numbers as floats, ``rhythm`` as text, plus ``max_hr_t_ms``/``min_hr_t_ms``.

    PAC/PVC breakdown clauses ("PVC breakdown: 40 single, 1 paired ...") give the
    breakdown fields and nothing else; the other fields are read from the other clauses.
    """
    body = _normalize(text or "")
    out = _json_stats(body)
    every = clauses(body)
    parts = [c for c in every if not breakdown_class(c)]
    for field in NUMERIC_FIELDS:
        if field in out or field == "duration_s" or field not in _PATTERNS:
            continue
        hit = _first(field, parts)
        if hit is None:
            continue
        out[field] = hit[0]
        if field in ("max_hr_bpm", "min_hr_bpm"):
            _hr_times(out, field, hit)
    if True:  # "2 runs of VT and 1 run of SVT", "0 VT runs, 2 SVT runs" -> the sum
        kinds = r"(vt|svt|nsvt|(?:supra)?ventricular\s+tachycardia)"
        rest = ". ".join(parts)
        typed = re.findall(rf"{NUM}\s+runs?\s+of\s+{kinds}", rest, re.I) + re.findall(rf"{NUM}\s+{kinds}\s+(?:runs?|episodes?)", rest, re.I)
        if len({kind.lower() for _, kind in typed}) >= 2:
            out["runs"] = float(sum(_num(v) for v, _ in typed))
    for match in _NO_LIST.finditer(". ".join(parts)):  # "No pauses, couplets or runs were seen." -> all three 0
        for field, kw in COUNT_KW.items():
            if field not in out and re.search(rf"\b{kw}\b", match.group(1), re.I):
                out[field] = 0.0
    for clause in every:
        for field, value in breakdown_counts(clause).items():
            out.setdefault(field, value)
    if "max_hr_bpm" not in out or "min_hr_bpm" not in out:
        match = _HR_RANGE.search(body)
        if match:
            out.setdefault("min_hr_bpm", _num(match.group("lo")))
            out.setdefault("max_hr_bpm", _num(match.group("hi")))
    if "duration_s" not in out:
        duration = _duration_s(parts)
        if duration is not None:
            out["duration_s"] = duration
    if "rhythm" not in out:
        for clause in parts:
            match = _RHYTHM_FIELD.search(clause)
            if match:
                out["rhythm"] = match.group("r").strip()
                break
    return out


# ------------------------------------------------------------------ findings

def rhythm_findings(text: str) -> list[str]:
    return sorted(k for k, pattern in RHYTHM_TERMS.items() if asserted(pattern, text or ""))


def truth_findings(truth: dict[str, Any]) -> set[str]:
    found = set(rhythm_findings(str(truth.get("rhythm", ""))))
    for name, (_, field) in COUNT_TERMS.items():
        value = truth.get(field)
        if isinstance(value, int | float) and value > 0:
            found.add(name)
    return found


def claimed_findings(text: str, extracted: dict[str, Any]) -> set[str]:
    body = _normalize(text or "")
    claims = set(rhythm_findings(body))
    for name, (pattern, field) in COUNT_TERMS.items():
        if extracted.get(field) == 0:
            continue
        if asserted(pattern, body):
            claims.add(name)
    return claims


def field_tolerance(field: str, truth: float) -> float:
    """Absolute tolerance for ``field`` at true value ``truth`` (see the module docstring)."""
    t = abs(float(truth))
    if field == "duration_s":
        return max(60.0, 0.01 * t)
    if field == "total_beats":
        return max(10.0, 0.02 * t)
    if field.endswith("_hr_bpm"):
        return max(5.0, 0.10 * t)
    if field.startswith("pct_time"):
        return 2.0
    if field in ("pac_total", "pvc_total"):
        return max(2.0, 0.05 * t)
    if field in ("pac_pct", "pvc_pct"):
        return max(0.1, 0.10 * t)
    return float(math.floor(0.10 * t))


def truth_statistics(item: dict[str, Any]) -> dict[str, Any]:
    """The true statistics of a report item: its JSON answer, else read from its prose answer."""
    answer = item.get("answer")
    if isinstance(answer, dict):
        return dict(answer)
    try:
        data = json.loads(answer) if isinstance(answer, str) else None
    except ValueError:
        data = None
    return data if isinstance(data, dict) else extract_statistics(str(answer or ""))


def score_report(item: dict[str, Any], text: str) -> dict[str, Any]:
    """Compare every true field with the model's, list hallucinated findings."""
    truth = truth_statistics(item)
    got = extract_statistics(text)
    fields: dict[str, Any] = {}
    for field in REPORT_FIELDS:
        if field not in truth or truth[field] is None:
            continue
        if field == "rhythm":
            want = rhythm_findings(str(truth["rhythm"]))
            said = got.get("rhythm") or ""
            have = rhythm_findings(said) if said else rhythm_findings(_normalize(text))
            reported = bool(said) or bool(have) or bool(re.search(r"sinus\s+rhythm", text or "", re.I))
            status = "missing" if not reported else ("correct" if have == want else "wrong")
            fields[field] = {"truth": want, "pred": have, "tolerance": None, "status": status}
            continue
        value = got.get(field)
        tol = field_tolerance(field, truth[field])
        status = "missing" if value is None else ("correct" if abs(value - float(truth[field])) <= tol + 1e-9 else "wrong")
        fields[field] = {"truth": truth[field], "pred": value, "tolerance": round(tol, 6), "status": status}
    n = len(fields)
    correct = sum(1 for f in fields.values() if f["status"] == "correct")
    reported = sum(1 for f in fields.values() if f["status"] != "missing")
    # a finding counted by a field the truth lacks (a JSON report has no breakdowns) can be neither confirmed nor denied
    unknown = {name for name, (_, field) in COUNT_TERMS.items() if field not in truth}
    claims = claimed_findings(text, got) - unknown
    truth_set = truth_findings(truth)
    return {"fields": fields, "n_fields": n, "n_correct": correct, "field_accuracy": round(correct / n, 6) if n else 0.0,
            "completeness": round(reported / n, 6) if n else 0.0, "extracted": got,
            "claimed": sorted(claims), "truth_findings": sorted(truth_set), "hallucinations": sorted(claims - truth_set)}
