"""Read the statistics out of a Holter report written by a model, and check them.

:func:`extract_statistics` reads the fields of
:data:`ecgtrace.agents.holter.report.REPORT_FIELDS` from free text or JSON,
tolerant to the ways people write them::

    "mean HR 72 bpm", "average heart rate of 72 bpm", "Heart rate mean 72 bpm, maximum 131 bpm"
    "PVCs: 123 (0.5%)", "123 PVCs (0.5%)", "Ventricular ectopy: 123 beats (0.5%)", "PVC burden 0.5%"
    "max heart rate of 131 bpm at 14:02:03" (the time is kept as max_hr_t_ms, h:m:s elapsed)
    "3.2% of the time above 100 bpm", "HR < 60 bpm: 10.1%", "no pauses", "two couplets"

A JSON object in the reply (``report_statistics`` asks for one) is read
first; fields it lacks fall back to the text rules. Each field is compared to
the truth within :func:`field_tolerance`:

* ``duration_s``: max(60 s, 1 %); ``total_beats``: max(10, 2 %);
* heart rates (``*_hr_bpm``): max(5 bpm, 10 %), the ANSI/AAMI EC13 heart-rate
  accuracy requirement;
* ``pct_time_hr_gt_100`` / ``pct_time_hr_lt_60``: 2 percentage points;
* ``pac_total`` / ``pvc_total``: max(2, 5 %); ``pac_pct`` / ``pvc_pct``:
  max(0.1 points, 10 %);
* episode counts (couplets, runs, bigeminy, trigeminy, pauses): 10 % rounded
  down, so exact below 10;
* ``rhythm``: the set of rhythm findings named (AF, first-degree AV block,
  sinus tachycardia, sinus bradycardia, flutter, 2nd/3rd-degree block) equals
  the truth's.

**Hallucinations** are findings the model asserts (named, not negated, and
not with a count of 0) that the truth does not hold: a rhythm finding not in
the true rhythm, or couplets/runs/VT/SVT/bigeminy/trigeminy/pauses/PACs/PVCs
when the true count is 0.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ecgtrace.agents.holter.report import DIAGNOSIS_LABELS, REPORT_FIELDS
from ecgtrace.agents.exam.parsing import json_values
from ecgtrace.agents.exam.parsing import strip_thinking
from ecgtrace.agents.exam.reply_values import parse_times_ms

NUM = r"(?<![\d.,])(?P<v>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|no|zero|one|two|three|four|five|six|seven|eight|nine|ten)(?!\.?\d)"
_WORD = {"no": 0, "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_NOT_UNIT = r"(?!\s*(?:%|bpm|ms\b|msec|s\b|sec|mv\b|hours?\b|h\b|min))"
_SKIP_WORD = r"(?:(?!ms\b|s\b|sec|bpm|mv\b|hours?\b|h\b|min|and\b|or\b)[a-z]+\s+)"
_NEG = re.compile(r"\b(?:no|not|without|absent|denies|negative\s+for|free\s+of|nor|none|neither)\b", re.I)

PVC = r"(?:pvcs?|vpcs?|vpbs?|ves|premature\s+ventricular\s+(?:contractions?|complex(?:es)?|beats?)|ventricular\s+(?:ectopy|ectopic\s+beats?|premature\s+(?:beats?|complex(?:es)?|contractions?)|extrasystoles?))"
PAC = (r"(?:pacs?|apcs?|apbs?|sves|svpbs?|premature\s+atrial\s+(?:contractions?|complex(?:es)?|beats?)|"
       r"supraventricular\s+(?:ectopy|ectopic\s+beats?|premature\s+(?:beats?|complex(?:es)?|contractions?)|extrasystoles?)|"
       r"atrial\s+(?:ectopy|ectopic\s+beats?|premature\s+(?:beats?|complex(?:es)?)))")
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
    "avb1": r"first[-\s]degree\s+(?:av\s+|atrioventricular\s+|heart\s+)?block|1st[-\s]degree\s+(?:av\s+)?block|\bavb1\b",
    "avb2": r"second[-\s]degree\s+(?:av\s+|atrioventricular\s+|heart\s+)?block|mobitz|wenckebach",
    "avb3": r"third[-\s]degree\s+(?:av\s+|atrioventricular\s+|heart\s+)?block|complete\s+(?:heart|av)\s+block",
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
}
NUMERIC_FIELDS = tuple(f for f in REPORT_FIELDS if f != "rhythm")
_ALIASES = {"mean_hr": "mean_hr_bpm", "avg_hr_bpm": "mean_hr_bpm", "average_hr_bpm": "mean_hr_bpm", "max_hr": "max_hr_bpm",
            "min_hr": "min_hr_bpm", "beats": "total_beats", "duration": "duration_s", "pvcs": "pvc_total", "pacs": "pac_total",
            "bigeminy": "bigeminy_episodes", "trigeminy": "trigeminy_episodes"}


def _num(token: str) -> float:
    token = token.lower()
    return float(_WORD[token]) if token in _WORD else float(token.replace(",", ""))


def clauses(text: str) -> list[str]:
    """Sentences/clauses: split at ``.``/``;`` before a space or the end, and at newlines (never inside 0.5)."""
    return [c.strip() for c in re.split(r"[.;](?=\s|$)|\n", text) if c.strip()]


def _normalize(text: str) -> str:
    text = strip_thinking(text).replace("_", " ").replace("*", "")
    return re.sub(r"(\d)-(hours?|h|minutes?|min|seconds?|s)\b", r"\1 \2", text, flags=re.I)


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
_HR_TAIL = rf"\s*(?:heart\s*rate|hr|rate|ventricular\s+rate)?\s*(?:was|of|is|=|:|reached|at)?\s*(?:of\s+)?{NUM}(?!\s*(?:%|ms\b|s\b|sec|mv))"
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
_HR_RANGE = re.compile(rf"(?:heart\s*rate|hr)[^.;\n]{{0,20}}?(?:ranged|range|ranging|varied|varying)\s*(?:from|between)?\s*{NUM.replace('<v>', '<lo>')}\s*(?:bpm)?\s*(?:to|-|and)\s*{NUM.replace('<v>', '<hi>')}", re.I)
_DURATION = re.compile(r"\b(?:duration|recorded|recording|monitor(?:ing|ed)|length|analy[sz]ed)\b", re.I)
_RHYTHM_FIELD = re.compile(r"\b(?:underlying\s+|dominant\s+|predominant\s+)?rhythm\s*(?:[:=]|was|is)\s*(?P<r>[^\n;]+)", re.I)
_NO_LIST = re.compile(r"\b(?:no|without|absence\s+of)\s+((?:(?!\bbut\b|\bwith\b|\balthough\b|\bexcept\b)[^.;\n\d])+)", re.I)
_TIME_AFTER = re.compile(r"^\s*(?:bpm|beats\s+per\s+minute)?\s*\)?\s*,?\s*(?:at|@|occurring\s+at|recorded\s+at|reached\s+at)\s*", re.I)


def _first(field: str, parts: list[str]) -> tuple[float, re.Match[str], str] | None:
    for pattern in _PATTERNS[field]:
        for clause in parts:
            if field.startswith(("mean_hr", "max_hr", "min_hr")) and not re.search(r"heart\s*rate|\bhr\b|bpm|\brate\b", clause, re.I):
                continue
            if field == "total_beats" and re.search(rf"\b(?:{PVC}|{PAC})\b|ectopy|ectopic", clause, re.I) and pattern is _PATTERNS[field][2]:
                continue
            match = pattern.search(clause)
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


def extract_statistics(text: str) -> dict[str, Any]:
    """Every field found in ``text``: numbers as floats, ``rhythm`` as text, plus ``max_hr_t_ms``/``min_hr_t_ms``."""
    body = _normalize(text or "")
    out = _json_stats(body)
    parts = clauses(body)
    for field in NUMERIC_FIELDS:
        if field in out or field == "duration_s" or field not in _PATTERNS:
            continue
        hit = _first(field, parts)
        if hit is None:
            continue
        out[field] = hit[0]
        if field in ("max_hr_bpm", "min_hr_bpm"):
            rest = hit[2][hit[1].end():]
            lead = _TIME_AFTER.match(rest)
            if lead:
                times = parse_times_ms(rest[lead.end():lead.end() + 30])
                if times:
                    out[field.replace("_bpm", "_t_ms")] = times[0]
    if True:  # "2 runs of VT and 1 run of SVT", "0 VT runs, 2 SVT runs" -> the sum
        kinds = r"(vt|svt|nsvt|(?:supra)?ventricular\s+tachycardia)"
        typed = re.findall(rf"{NUM}\s+runs?\s+of\s+{kinds}", body, re.I) + re.findall(rf"{NUM}\s+{kinds}\s+(?:runs?|episodes?)", body, re.I)
        if len({kind.lower() for _, kind in typed}) >= 2:
            out["runs"] = float(sum(_num(v) for v, _ in typed))
    for match in _NO_LIST.finditer(body):  # "No pauses, couplets or runs were seen." -> all three 0
        for field, kw in COUNT_KW.items():
            if field not in out and re.search(rf"\b{kw}\b", match.group(1), re.I):
                out[field] = 0.0
    if "max_hr_bpm" not in out or "min_hr_bpm" not in out:
        match = _HR_RANGE.search(body)
        if match:
            out.setdefault("min_hr_bpm", _num(match.group("lo")))
            out.setdefault("max_hr_bpm", _num(match.group("hi")))
    if "duration_s" not in out:
        for clause in parts:
            match = re.search(r"(\d+(?:\.\d+)?)\s*(?:h|hours?|hrs?)\s+(?:of\s+)?(?:recording|recorded|monitoring|holter|ecg|data)", clause, re.I)
            times = [float(match.group(1)) * 3.6e6] if match else []
            found = _DURATION.search(clause)
            if not times and found:
                times = parse_times_ms(clause[found.end():found.end() + 40], bare=False)
            if times:
                out["duration_s"] = round(times[0] / 1000.0, 3)
                break
    if "rhythm" not in out:
        for clause in parts:
            match = _RHYTHM_FIELD.search(clause)
            if match:
                out["rhythm"] = match.group("r").strip()
                break
    return out


# ------------------------------------------------------------------ findings

def _mentions(pattern: str, text: str) -> list[int]:
    return [m.start() for m in re.finditer(pattern, text, re.I)]


def _negated(text: str, pos: int) -> bool:
    """A negation word in the 40 characters before ``pos`` (same clause), or a count of 0 right before it."""
    start = max(text.rfind(".", 0, pos), text.rfind(";", 0, pos), text.rfind("\n", 0, pos), pos - 40)
    prefix = text[start + 1:pos]
    return bool(_NEG.search(prefix) or re.search(r"(?<![\d.])(?:0|zero)\s+(?:[a-z]+\s+)?$", prefix, re.I))


def asserted(pattern: str, text: str) -> bool:
    """Named at least once without a negation in the 40 characters before it (same clause)."""
    return any(not _negated(text, p) for p in _mentions(pattern, text))


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
    claims = claimed_findings(text, got)
    truth_set = truth_findings(truth)
    return {"fields": fields, "n_fields": n, "n_correct": correct, "field_accuracy": round(correct / n, 6) if n else 0.0,
            "completeness": round(reported / n, 6) if n else 0.0, "extracted": got,
            "claimed": sorted(claims), "truth_findings": sorted(truth_set), "hallucinations": sorted(claims - truth_set)}


# ------------------------------------------------------------------ diagnosis labels

LABEL_TERMS: dict[str, str] = {
    "pac": PAC, "pvc": PVC, "v_couplet": r"couplets?", "vt": COUNT_TERMS["vt"][0], "svt": COUNT_TERMS["svt"][0],
    "v_bigeminy": r"bigemin", "v_trigeminy": r"trigemin", "af": RHYTHM_TERMS["af"], "pause": r"\bpauses?\b|sinus\s+arrest",
    "avb1": RHYTHM_TERMS["avb1"], "sinus_tachycardia": RHYTHM_TERMS["sinus_tachycardia"],
    "sinus_bradycardia": RHYTHM_TERMS["sinus_bradycardia"], "normal": r"normal\s+sinus\s+rhythm|\bnsr\b|normal\s+(?:ecg|rhythm)",
}
#: Findings a correct answer may also name (a couplet is made of PVCs...).
_COMPATIBLE = {"v_couplet": {"pvc"}, "vt": {"pvc"}, "v_bigeminy": {"pvc"}, "v_trigeminy": {"pvc"}, "svt": {"pac"}}


def label_verdict(text: str, label: str) -> dict[str, Any]:
    """Open diagnosis: the true finding is named (not negated) and no other abnormal finding is."""
    body = _normalize(text)
    named = sorted(k for k, pattern in LABEL_TERMS.items() if asserted(pattern, body))
    by_label = {v.lower(): k for k, v in DIAGNOSIS_LABELS.items()}
    kind = by_label.get(label.strip().lower())
    if kind is None:
        ok = label.strip().lower() in body.lower()
        return {"correct": ok, "named": named, "truth_kind": None}
    abnormal = {k for k in named if k != "normal"}
    if kind == "normal":
        ok = not abnormal and ("normal" in named or bool(re.search(r"sinus\s+rhythm", body, re.I)))
    else:
        ok = kind in abnormal and not (abnormal - {kind} - _COMPATIBLE.get(kind, set()))
    return {"correct": bool(ok), "named": named, "truth_kind": kind}
