"""Findings named in free text: one table of diagnosis synonyms, negation, and the set of labels a reply asserts.

Every reader of findings in a model's words uses this module: the open
diagnosis verdict (:func:`label_verdict`, one label or several), the report
reader (:mod:`ecgtrace.agents.exam.report_stats`: claimed findings and
hallucinations) and the Holtercare importer (labels in an answer sentence).

:data:`LABEL_TERMS` maps each finding (an event kind of
:mod:`ecgtrace.contracts.vocabulary`, ``normal``, and the few labels
Holtercare-Bench uses beyond that vocabulary, :data:`EXTRA_LABELS`) to the
ways people write it: "PVC", "ventricular premature beat", "premature
ventricular contraction" are one finding. Where one mention lies inside a
longer one of another finding, the longer wins: "polymorphic ventricular
tachycardia" names polymorphic VT, not VT; "non-conducted PACs" are not PACs;
"paired premature atrial contractions" are atrial couplets.

A finding is *asserted* when it is named at least once without a negation
("no", "not", "without", "absent", a count of 0 ...) in the 40 characters
before it, in the same clause.
"""

from __future__ import annotations

import re
from typing import Any

from ecgtrace.agents.exam.parsing import strip_thinking
from ecgtrace.contracts.vocabulary import KINDS, NORMAL, NORMAL_DIAGNOSIS

_NEG = re.compile(r"\b(?:no|not|without|absent|denies|negative\s+for|free\s+of|nor|none|neither)\b", re.I)

#: Ectopy as people write it (also the report reader's PAC/PVC keywords).
PVC = (r"(?:pvcs?|vpcs?|vpbs?|ves|premature\s+ventricular\s+(?:contractions?|complex(?:es)?|beats?|depolarizations?)|"
       r"ventricular\s+(?:ectopy|ectopic\s+beats?|premature\s+(?:beats?|complex(?:es)?|contractions?)|extrasystoles?))")
PAC = (r"(?:pacs?|apcs?|apbs?|sves|svpbs?|premature\s+atrial\s+(?:contractions?|complex(?:es)?|beats?|depolarizations?)|"
       r"supraventricular\s+(?:ectopy|ectopic\s+beats?|premature\s+(?:beats?|complex(?:es)?|contractions?)|extrasystoles?)|"
       r"premature\s+supraventricular\s+(?:contractions?|complex(?:es)?|beats?)|"
       r"atrial\s+(?:ectopy|ectopic\s+beats?|premature\s+(?:beats?|complex(?:es)?|contractions?)|extrasystoles?))")
_PAC_NOUN = r"(?:pacs?|premature\s+atrial\s+(?:contractions?|complex(?:es)?|beats?)|atrial\s+premature\s+(?:beats?|contractions?|complex(?:es)?))"
_AVB = r"(?:\s+(?:av|atrioventricular|heart))?\s+block"
_TYPE1 = r"(?:type\s*)?(?:i|1)(?![\w])"
_TYPE2 = r"(?:type\s*)?(?:ii|2)(?![\w])"

#: Labels Holtercare-Bench uses beyond the event vocabulary: ``{name: diagnosis label}``.
EXTRA_LABELS: dict[str, str] = {"polymorphic_vt": "polymorphic ventricular tachycardia", "torsades": "torsades de pointes",
                                "avb2": "second-degree AV block"}

#: ``{finding: regex}``: every way a finding is written (case-insensitive).
LABEL_TERMS: dict[str, str] = {
    "pac": PAC,
    "pvc": PVC,
    "v_couplet": r"(?:ventricular\s+)?couplets?|(?:paired|pairs?\s+of)\s+(?:pvcs?|premature\s+ventricular\s+(?:contractions?|complex(?:es)?|beats?))",
    "s_couplet": rf"(?:atrial|supraventricular)\s+couplets?|(?:paired|pairs?\s+of)\s+{_PAC_NOUN}",
    "vt": r"(?<!supra)ventricular\s+tachycardia|\bvt\b|\bnsvt\b",
    "polymorphic_vt": r"polymorphic\s+(?:ventricular\s+tachycardia|vt\b)",
    "torsades": r"torsades?\s+de\s+pointes|\btdp\b",
    "svt": r"supraventricular\s+tachycardia|\bp?svt\b",
    "atrial_tachycardia": r"(?:ectopic\s+|focal\s+|multifocal\s+)?atrial\s+tachycardia",
    "v_bigeminy": r"(?:ventricular\s+)?bigemin(?:y|al(?:\s+rhythm)?)",
    "v_trigeminy": r"(?:ventricular\s+)?trigemin(?:y|al(?:\s+rhythm)?)",
    "s_bigeminy": r"(?:atrial|supraventricular)\s+bigemin(?:y|al(?:\s+rhythm)?)",
    "s_trigeminy": r"(?:atrial|supraventricular)\s+trigemin(?:y|al(?:\s+rhythm)?)",
    "af": r"atrial\s+fibrillation|\ba-?fib\b|\baf\b",
    "afl": r"atrial\s+flutter|\ba-?flutter\b|\bafl\b",
    "vf": r"ventricular\s+fibrillation|\bv-?fib\b|\bvf\b",
    "vfl": r"ventricular\s+flutter|\bvfl\b",
    "asystole": r"asystol(?:e|ic\s+pauses?)|ventricular\s+standstill",
    "pause": r"\bpauses?\b|sinus\s+arrest",
    "avb1": rf"(?:first|1st)[-\s]degree{_AVB}|\bavb1\b",
    "avb2": rf"(?:second|2nd)[-\s]degree{_AVB}",
    "avb2_mobitz1": rf"(?:(?:second|2nd)[-\s]degree{_AVB},?\s+(?:\(?mobitz\s+)?{_TYPE1}\)?(?:\s*\(wenckebach\))?)|mobitz\s*{_TYPE1}(?:\s*\(wenckebach\))?|wenckebach(?:\s+block)?",
    "avb2_mobitz2": rf"(?:(?:second|2nd)[-\s]degree{_AVB},?\s+(?:\(?mobitz\s+)?{_TYPE2}\)?)|mobitz\s*{_TYPE2}",
    "avb_2to1": rf"2\s*:\s*1{_AVB}|2\s*:\s*1\s+(?:av\s+)?conduction|2-to-1{_AVB}",
    "avb3": rf"(?:third|3rd)[-\s]degree{_AVB}|complete{_AVB}|\bchb\b",
    "blocked_pac": rf"(?:non-?\s*conducted|blocked)\s+(?:{_PAC_NOUN}|p\s+waves?)",
    "junctional_escape": r"(?:junctional|nodal)\s+escape\s+(?:beats?|complex(?:es)?)",
    "ventricular_escape": r"ventricular\s+escape\s+(?:beats?|complex(?:es)?)",
    "junctional_rhythm": r"(?:junctional|nodal)\s+(?:escape\s+)?rhythm",
    "ventricular_escape_rhythm": r"ventricular\s+escape\s+rhythm|(?<!accelerated\s)idioventricular\s+rhythm",
    "sinus_tachycardia": r"sinus\s+tachycardia",
    "sinus_bradycardia": r"sinus\s+bradycardia",
    NORMAL: r"normal\s+sinus\s+rhythm|\bnsr\b|normal\s+(?:ecg|rhythm)",
}
_COMPILED = {kind: re.compile(pattern, re.I) for kind, pattern in LABEL_TERMS.items()}

#: Findings a correct answer may also name: a couplet is made of PVCs, an asystole is a pause ...
COMPATIBLE: dict[str, frozenset[str]] = {
    "v_couplet": frozenset({"pvc"}), "vt": frozenset({"pvc"}), "v_bigeminy": frozenset({"pvc"}), "v_trigeminy": frozenset({"pvc"}),
    "polymorphic_vt": frozenset({"pvc", "vt"}), "torsades": frozenset({"pvc", "vt", "polymorphic_vt"}),
    "svt": frozenset({"pac"}), "s_couplet": frozenset({"pac"}), "s_bigeminy": frozenset({"pac"}), "s_trigeminy": frozenset({"pac"}),
    "atrial_tachycardia": frozenset({"svt"}), "asystole": frozenset({"pause"}), "blocked_pac": frozenset({"pause"}),
    "avb2_mobitz1": frozenset({"avb2"}), "avb2_mobitz2": frozenset({"avb2"}), "avb_2to1": frozenset({"avb2"}),
    "ventricular_escape_rhythm": frozenset({"ventricular_escape"}), "junctional_rhythm": frozenset({"junctional_escape"}),
}


def label_of(kind: str) -> str:
    """The diagnosis label of a finding (``"pvc"`` -> ``"premature ventricular contraction"``)."""
    if kind == NORMAL:
        return NORMAL_DIAGNOSIS
    return KINDS[kind].diagnosis if kind in KINDS else EXTRA_LABELS[kind]


def normalize(text: str) -> str:
    """Thinking left out, ``_`` and ``*`` as spaces, ``24-hour`` as ``24 hour``."""
    text = strip_thinking(text).replace("_", " ").replace("*", "")
    return re.sub(r"(\d)-(hours?|h|minutes?|min|seconds?|s)\b", r"\1 \2", text, flags=re.I)


def clauses(text: str) -> list[str]:
    """Sentences/clauses: split at ``.``/``;`` before a space or the end, and at newlines (never inside 0.5)."""
    return [c.strip() for c in re.split(r"[.;](?=\s|$)|\n", text) if c.strip()]


def negated(text: str, pos: int) -> bool:
    """A negation word in the 40 characters before ``pos`` (same clause), or a count of 0 right before it."""
    start = max(text.rfind(".", 0, pos), text.rfind(";", 0, pos), text.rfind("\n", 0, pos), pos - 40)
    prefix = text[start + 1:pos]
    return bool(_NEG.search(prefix) or re.search(r"(?<![\d.])(?:0|zero)\s+(?:[a-z]+\s+)?$", prefix, re.I))


def mentions(pattern: str, text: str) -> list[int]:
    return [m.start() for m in re.finditer(pattern, text, re.I)]


def asserted(pattern: str, text: str) -> bool:
    """Named at least once without a negation in the 40 characters before it (same clause)."""
    return any(not negated(text, p) for p in mentions(pattern, text))


def label_mentions(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, finding)`` of every mention in ``text``, a mention inside a longer one of another finding left out."""
    spans = [(m.start(), m.end(), kind) for kind, regex in _COMPILED.items() for m in regex.finditer(text) if m.end() > m.start()]
    kept = [(a, b, k) for (a, b, k) in spans
            if not any(c <= a and b <= d and (d - c) > (b - a) and other != k for (c, d, other) in spans)]
    return sorted(kept)


def named_labels(text: str) -> list[str]:
    """The findings ``text`` asserts (named and not negated), sorted."""
    body = normalize(text or "")
    return sorted({k for a, _, k in label_mentions(body) if not negated(body, a)})


def truth_labels(answer: str) -> list[str]:
    """The findings of a diagnosis answer: one label, or several (``"premature atrial contraction; sinus pause"``)."""
    return sorted({k for _, _, k in label_mentions(normalize(answer or ""))})


def label_verdict(text: str, label: str) -> dict[str, Any]:
    """Open diagnosis: the findings a reply asserts against the answer's finding(s).

    The answer names one finding or several; the reply's abnormal findings are
    compared with them as sets. Findings compatible with a true one (PVCs of a
    couplet) are neither hits nor errors. ``correct`` is the exact set match,
    with ``precision``, ``recall`` and ``f1`` of the findings. A normal answer
    is matched by a reply that names no abnormal finding and says normal (or
    sinus) rhythm.
    """
    body = normalize(text or "")
    named = named_labels(body)
    truth = truth_labels(label)
    if not truth:  # a label outside the vocabulary: its words must appear
        ok = bool(label.strip()) and label.strip().lower() in body.lower()
        return {"correct": ok, "named": named, "truth_kind": None, "truth_kinds": [], "tp": int(ok), "fp": 0, "fn": int(not ok),
                "precision": float(ok), "recall": float(ok), "f1": float(ok)}
    abnormal = {k for k in named if k != NORMAL}
    if truth == [NORMAL]:
        ok = not abnormal and (NORMAL in named or bool(re.search(r"sinus\s+rhythm", body, re.I)))
        tp, fp, fn = int(ok), len(abnormal), int(not ok)
    else:
        want = set(truth) - {NORMAL}
        allowed = set().union(*(COMPATIBLE.get(k, frozenset()) for k in want))
        hits, extra = abnormal & want, abnormal - want - allowed
        ok = hits == want and not extra
        tp, fp, fn = len(hits), len(extra), len(want - hits)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return {"correct": bool(ok), "named": named, "truth_kind": truth[0] if len(truth) == 1 else None, "truth_kinds": truth,
            "tp": tp, "fp": fp, "fn": fn, "precision": round(precision, 6), "recall": round(recall, 6), "f1": round(f1, 6)}
