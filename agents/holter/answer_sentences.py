"""An item's answer as people write it: Holtercare-Bench's sentences, letters with text, synonyms.

Holtercare-Bench answers closed questions with the letter and the option's
text ("D. 1") and open ones with sentences ("A total of 1 episode of
Premature Ventricular Contraction is detected in this segment.", "... the
timestamps are: 1028324, 17179240, 17215495 ms."). :func:`answer_sentences`
gives every phrasing of one item's answer that this module knows;
:func:`holtercare_answer` the one the Holtercare export writes. The scorer's
rule, checked by the tests for every template and every phrasing here: an
answer fed back as a reply scores 100 %.
"""

from __future__ import annotations

import json
from typing import Any

from ecgtrace.agents.holter.report import DIAGNOSIS_LABELS, REPORT_FIELDS, STATISTICS_FIELDS
from ecgtrace.agents.holter.report_prose import LAYOUTS, PHRASINGS, report_prose
from ecgtrace.contracts.vocabulary import KINDS, NORMAL

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: Short names people use for findings (the synonyms a reply may use instead of the label).
SHORT_NAMES: dict[str, str] = {"pvc": "PVCs", "pac": "PACs", "af": "AF", "vt": "VT", "svt": "SVT", "v_couplet": "couplets",
                               "avb1": "1st-degree AV block", "avb3": "complete heart block", "vf": "VF", "afl": "atrial flutter"}


def _title(label: str) -> str:
    """Holtercare capitalises labels: "Premature Ventricular Contraction" (AV, 2:1 kept)."""
    return " ".join(w if (w.isupper() or any(c.isdigit() for c in w)) else w[:1].upper() + w[1:] for w in label.split(" "))


def _kinds_of(answer: str) -> list[str]:
    by_label = {v: k for k, v in DIAGNOSIS_LABELS.items()}
    return [by_label.get(part.strip(), part.strip()) for part in answer.split(";") if part.strip()]


def _label(kind: str) -> str:
    return DIAGNOSIS_LABELS.get(kind, kind)


def _plural(kind: str | None) -> str:
    """The plural the sentence uses, without a parenthesis (an asystole's "(pauses over 3 s)" would read as a time)."""
    if kind in KINDS:
        return KINDS[kind].plural.split(" (")[0]
    return "events"


def _listed(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def closed_sentences(options: list[str], answer: str) -> list[str]:
    """``["D. 1", "D", "The answer is D. 1", "D) 1"]``, or the yes/no sentences of a question without options."""
    letter = LETTERS[options.index(answer)]
    return [f"{letter}. {answer}", letter, f"The answer is {letter}. {answer}", f"{letter}) {answer}", f"**{letter}. {answer}**"]


def _presence(item: dict[str, Any]) -> list[str]:
    label = _title(_label(item.get("finding") or "the finding"))
    if item["answer"] == "Yes":
        return ["Yes", f"Yes, the rhythm pattern supports the presence of {label}.", f"Yes. {label} is present in this segment."]
    return ["No", f"No, the rhythm pattern does not support the presence of {label}.", f"No. There is no {label} in this segment."]


def _count(item: dict[str, Any]) -> list[str]:
    n = int(item["answer"])
    kind = item.get("finding")
    label, plural = _title(_label(kind)) if kind else "the event", _plural(kind)
    where = "in this segment" if item.get("window") else "in the whole recording"
    if n == 0:
        return ["0", f"No episode of {label} is detected {where}.", f"A total of 0 episodes of {label} are detected {where}."]
    episodes = "episode" if n == 1 else "episodes"
    return [str(n), f"A total of {n:,} {episodes} of {label} {'is' if n == 1 else 'are'} detected {where}.",
            f"There are {n} {plural} {where}.", f"Answer: {n}"]


def _times(item: dict[str, Any]) -> list[str]:
    from ecgtrace.agents.exam.reply_values import parse_times_ms

    times = [int(t) for t in parse_times_ms(item["answer"])]
    label = _title(_label(item.get("finding") or "the event"))
    if not times:
        return ["none", f"No {label} is detected in this segment."]
    bare = ", ".join(str(t) for t in times)
    out = [f"The onset timestamps of {label} in this segment are: {bare} ms.", f"{_listed([str(t) for t in times])} ms"]
    if len(times) > 1:
        out.append(f"{label} begins at {_listed([f'{t} ms' for t in times])}.")
    return out


def _extremum(item: dict[str, Any]) -> list[str]:
    t = int(round(float(item["answer"].split()[0])))
    hr = str((item.get("provenance") or {}).get("params", {}).get("hr_kind") or "max")
    fastest, word = ("fastest", "maximum") if hr == "max" else ("slowest", "minimum")
    return [f"{t} ms", f"Based on the analysis, the {fastest} heart rate is detected at {t} ms.",
            f"The {word} heart rate occurs at {t} ms from the recording start."]


def _diagnosis(item: dict[str, Any]) -> list[str]:
    kinds = _kinds_of(item["answer"])
    titled = [_title(_label(k)) for k in kinds]
    if kinds == [NORMAL]:
        return ["This ECG strip shows normal sinus rhythm with no arrhythmia.", "Normal sinus rhythm."]
    if len(kinds) == 1:
        return [f"The arrhythmia present in this ECG strip is {titled[0]}.", titled[0], f"This segment shows {_label(kinds[0])}."]
    out = [f"The arrhythmias present in this ECG strip are {_listed(titled)}.", f"{_listed([_label(k) for k in kinds])}."]
    if all(k in SHORT_NAMES for k in kinds):
        out.append(f"The strip shows {_listed([SHORT_NAMES[k] for k in kinds])}.")
    return out


def _report(item: dict[str, Any]) -> list[str]:
    from ecgtrace.agents.exam.report_stats import truth_statistics

    # counts read back from prose are floats: written again as the integers they are
    stats = {k: int(v) if isinstance(v, float) and v.is_integer() and not k.endswith(("_bpm", "_pct")) and not k.startswith("pct_") else v
             for k, v in truth_statistics(item).items()}
    answer = item["answer"]
    is_json = answer.lstrip().startswith("{")
    stats = {k: v for k, v in stats.items() if k in STATISTICS_FIELDS} if is_json else stats
    out = [answer]
    widest = max(len(v) for v in PHRASINGS.values())
    for k in range(widest):
        for layout in LAYOUTS:
            text = report_prose(stats, layout, {name: k for name in PHRASINGS})
            if text not in out:
                out.append(text)
    if not is_json:  # the same statistics as JSON, breakdowns included
        out.append(json.dumps({k: v for k, v in stats.items() if k in REPORT_FIELDS}, sort_keys=True))
    return out


def answer_sentences(item: dict[str, Any]) -> list[str]:
    """Every phrasing of ``item``'s answer that a reply may use and that must score 100 % (the answer itself first;
    an imported item's own answer text, e.g. Holtercare's sentence, among them)."""
    own = ((item.get("provenance") or {}).get("params") or {}).get("answer_text")
    phrasings = [*_phrasings(item), *([own] if isinstance(own, str) else [])]
    return list(dict.fromkeys(phrasings))


def _phrasings(item: dict[str, Any]) -> list[str]:
    task, answer = str(item.get("task", "")), str(item["answer"])
    if item.get("options"):
        return [answer, *closed_sentences(list(item["options"]), answer)]
    if task == "closed_presence" or item.get("answer_type") == "yes_no":
        return [answer, *_presence(item)]
    if item.get("answer_type") == "integer":
        return [answer, *_count(item)]
    if item.get("answer_type") == "timestamps_ms":
        return [answer, *_times(item)]
    if item.get("answer_type") == "time_ms":
        return [answer, *_extremum(item)]
    if item.get("answer_type") == "label":
        return [answer, *_diagnosis(item)]
    if task.startswith("report_"):
        return _report(item)
    return [answer]


def holtercare_answer(item: dict[str, Any]) -> str:
    """The answer as Holtercare-Bench writes it: ``"D. 1"`` for closed items, a sentence for open ones, prose for reports."""
    if item.get("options"):
        return closed_sentences(list(item["options"]), str(item["answer"]))[0]
    sentences = answer_sentences(item)
    if str(item.get("task", "")).startswith("report_"):
        return next(s for s in sentences if not s.lstrip().startswith("{"))
    return sentences[1] if len(sentences) > 1 else sentences[0]
