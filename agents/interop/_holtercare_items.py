"""One Holtercare-Bench item read into the fields of an ecgtrace QA item: task, options, a normalised answer.

Holtercare's items (``../shared/formats/HOLTERCARE.md``) are
``{"id", "task_type", "qa_pair": {"question", "answer"}, "tag"}``; closed
questions carry their options inline ("... A. 2; B. 0; C. 3; D. 1") and are
answered with letter and text ("D. 1"); open ones are answered with sentences.
:func:`read_item` splits the options out of the question, checks that the
answer's letter and text name the same option, and reads an open answer into
the canonical value ecgtrace items hold (a count, times in ms, diagnosis
labels), keeping the sentence itself. What cannot be read without guessing
raises :class:`Rejected` with a code and a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ecgtrace.agents.exam.findings_text import label_of, label_mentions, named_labels, normalize
from ecgtrace.agents.exam.parsing import LETTERS, same_values
from ecgtrace.agents.exam.report_stats import extract_statistics
from ecgtrace.agents.exam.reply_values import parse_number, parse_times_ms
from ecgtrace.agents.holter.distractors import format_ms_list
from ecgtrace.contracts.vocabulary import NORMAL

#: Holtercare's task types -> ecgtrace's (``ecgtrace export holtercare`` maps them back).
TASK_MAP: dict[str, str] = {
    "closed_presence": "closed_presence", "closed_event_counting": "closed_count", "closed_event_timing": "closed_timing",
    "closed_HR_extremum_timing": "closed_hr_extremum", "closed_diagnosis": "closed_diagnosis",
    "open_event_counting": "open_count", "open_event_timing": "open_timing", "open_HR_extremum_timing": "open_hr_extremum",
    "open_diagnosis": "open_diagnosis", "open_evidence_reasoning": "open_evidence",
    "report_general_summary": "report_summary", "report_statistical_overview": "report_statistics",
}
#: The answer format of each ecgtrace task an imported item lands in.
ANSWER_TYPES: dict[str, str] = {
    "closed_presence": "yes_no", "closed_count": "integer", "closed_timing": "timestamps_ms", "closed_hr_extremum": "time_ms",
    "closed_diagnosis": "label", "open_count": "integer", "open_timing": "timestamps_ms", "open_hr_extremum": "time_ms",
    "open_diagnosis": "label", "open_evidence": "text", "report_summary": "text", "report_statistics": "text",
}
#: Tolerances an imported item is scored with (Holtercare publishes none): those of ecgtrace's own templates.
TOLERANCE_MS: dict[str, int] = {"closed_timing": 150, "open_timing": 150, "closed_hr_extremum": 2000, "open_hr_extremum": 2000}
_OPTION_SEP = r"(?:\s*;\s*|\s*\n\s*|\s{2,})"
_NEGATIVE = re.compile(r"\bnot\s+(?:supported|present|seen|consistent|shown)|\babsent\b|\bexcept\b|\bNOT\b")
_HR_MAX = re.compile(r"\b(?:max(?:imum|imal)?|highest|fastest|peak)\b", re.I)
_HR_MIN = re.compile(r"\b(?:min(?:imum|imal)?|lowest|slowest)\b", re.I)
_LETTER_ANSWER = re.compile(r"^\W*\(?([A-Z])\)?(?:[.):]|\s*$|\s+)\s*(.*?)\s*$", re.S)


class Rejected(ValueError):
    """An item that cannot be imported without guessing: ``code`` (malformed, unknown_task, options, answer) and the reason."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code


@dataclass
class ReadItem:
    """The ecgtrace side of one Holtercare item (without id and provenance, which the importer adds)."""

    case_id: str
    task_type: str
    task: str
    split: str | None
    question: str
    options: list[str] | None
    answer: str
    answer_type: str
    finding: str | None
    params: dict[str, Any] = field(default_factory=dict)


def _lettered(tail: str) -> list[str]:
    """The option texts of ``"A. x; B. y; ..."`` (letters in order, from A)."""
    head = re.match(r"A\.\s+", tail)
    if head is None:
        return []
    parts, position, letter = [], head.end(), 0
    while True:
        following = re.compile(rf"{_OPTION_SEP}{LETTERS[letter + 1]}\.\s+").search(tail, position) if letter + 1 < len(LETTERS) else None
        if following is None:
            parts.append(tail[position:].strip())
            return parts
        parts.append(tail[position:following.start()].strip())
        position, letter = following.end(), letter + 1


def split_options(question: str) -> tuple[str, list[str] | None]:
    """``"How many? A. 2; B. 0; C. 3; D. 1"`` -> ``("How many?", ["2", "0", "3", "1"])``; no inline options -> ``(question, None)``.

    The options are the last run of ``A. `` ``B. `` ... in letter order,
    separated by semicolons or line breaks; an option's text may hold commas
    and periods ("1028324, 17179240 ms").
    """
    for start in reversed([m.start(1) for m in re.finditer(r"(?:^|[\s:])(A\.\s)", question)]):
        parts = [p.rstrip(";").strip() for p in _lettered(question[start:])]
        if len(parts) >= 2 and all(parts):
            stem = re.sub(r"\s*(?:options?|choices?)\s*:?\s*$", "", question[:start].rstrip(), flags=re.I).rstrip()
            return stem, parts
    return question.strip(), None


def closed_answer(answer: str, options: list[str]) -> str:
    """The option a closed answer names: ``"D. 1"`` (letter and text must agree), ``"D"``, or the option's text."""
    text = answer.strip()
    for option in options:
        if text.lower().rstrip(".") == option.lower().rstrip("."):
            return option
    match = _LETTER_ANSWER.match(text)
    if match and LETTERS.find(match.group(1)) < len(options):
        chosen = options[LETTERS.find(match.group(1))]
        said = match.group(2).strip().rstrip(".")
        if not said or said.lower() == chosen.lower().rstrip(".") or same_values(said, chosen):
            return chosen
        raise Rejected("answer", f"answer {answer!r}: letter {match.group(1)} is option {chosen!r}, its text says {said!r}")
    raise Rejected("answer", f"answer {answer!r} names none of the options {options!r}")


def _yes_no(answer: str) -> str:
    opening = re.match(r"^\W*(yes|no)\b", answer, re.I)
    if opening is None:
        raise Rejected("answer", f"presence answer {answer[:80]!r} says neither yes nor no first")
    return opening.group(1).capitalize()


def diagnosis_kinds(text: str) -> list[str]:
    """The findings a diagnosis answer lists, each part of the list one known label ("X and Y", "X, Y and Z")."""
    body = normalize(text).strip()
    lead = list(re.finditer(r"\b(?:are|is|include|includes|shows?|reveals?)\b\s*:?\s*|:\s+", body))
    listed = body[lead[-1].end():] if lead else body
    parts = [p.strip(" .;") for p in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+|\s*;\s*", listed.rstrip(". ")) if p.strip(" .;")]
    kinds: list[str] = []
    for part in parts:
        found = {k for _, _, k in label_mentions(part)}
        if len(found) != 1:
            raise Rejected("answer", f"diagnosis {part!r} is {'no known label' if not found else 'several labels'}")
        kinds.append(found.pop())
    if not kinds:
        raise Rejected("answer", f"no diagnosis in {text[:80]!r}")
    return sorted(set(kinds))


def _open_answer(task: str, answer: str, question: str) -> tuple[str, str | None]:
    """(canonical answer, finding) of an open Holtercare answer sentence.

    A timing sentence that restates the window ("Between 1000 ms and 31000 ms,
    the onsets are ...") names times the question names too: those are the
    window's bounds, not onsets, and are left out.
    """
    if task == "open_count":
        value = parse_number(answer)
        if value is None or value < 0 or not float(value).is_integer():
            raise Rejected("answer", f"count answer {answer[:80]!r} holds no whole number")
        return str(int(value)), None
    if task == "open_timing":
        asked = {round(t) for t in parse_times_ms(question, bare=False)}
        times = [t for t in parse_times_ms(answer) if round(t) not in asked]
        if not times and not re.search(r"\b(?:no|none)\b", answer, re.I):
            raise Rejected("answer", f"timing answer {answer[:80]!r} holds no time")
        return format_ms_list(sorted(int(round(t)) for t in times)), None
    if task == "open_hr_extremum":
        times = sorted({int(round(t)) for t in parse_times_ms(answer)})
        if len(times) != 1:
            raise Rejected("answer", f"HR extremum answer {answer[:80]!r} holds {len(times)} times, not one")
        return f"{times[0]} ms", None
    if task == "open_diagnosis":
        kinds = diagnosis_kinds(answer)
        return "; ".join(sorted(label_of(k) for k in kinds)), kinds[0] if len(kinds) == 1 else None
    if task.startswith("report_") and not extract_statistics(answer):
        raise Rejected("answer", "report answer: no statistic could be read from it")
    return answer.strip(), None


def _finding(task: str, question: str, answer: str) -> str | None:
    """The event kind a question asks about (the one label it names), or the diagnosis of a one-label answer."""
    if task.endswith("_diagnosis"):
        kinds = [k for k in named_labels(answer)]
        return kinds[0] if len(kinds) == 1 else None
    if task.endswith("hr_extremum") or task.startswith("report_"):
        return None
    kinds = sorted({k for _, _, k in label_mentions(normalize(question))} - {NORMAL})
    return kinds[0] if len(kinds) == 1 else None


def read_item(obj: Any) -> ReadItem:
    """One Holtercare item -> :class:`ReadItem`; raises :class:`Rejected` with what is wrong."""
    if not isinstance(obj, dict):
        raise Rejected("malformed", f"an item is a JSON object, not {type(obj).__name__}")
    case, task_type, pair, tag = obj.get("id"), obj.get("task_type"), obj.get("qa_pair"), obj.get("tag")
    if not isinstance(case, str | int) or isinstance(case, bool) or not str(case).strip():
        raise Rejected("malformed", "no case id ('id')")
    if not isinstance(task_type, str) or task_type not in TASK_MAP:
        raise Rejected("unknown_task", f"task_type {task_type!r} is not one of Holtercare's 12 ({', '.join(TASK_MAP)})")
    if not isinstance(pair, dict) or not isinstance(pair.get("question"), str) or not isinstance(pair.get("answer"), str):
        raise Rejected("malformed", "qa_pair must hold a question and an answer, both text")
    if tag is not None and not isinstance(tag, str):
        raise Rejected("malformed", f"tag {tag!r} is not text")
    question, answer = pair["question"].strip(), pair["answer"].strip()
    if not question or not answer:
        raise Rejected("malformed", "empty question or answer")
    task = TASK_MAP[task_type]
    stem, options = split_options(question) if task.startswith("closed_") else (question, None)
    params: dict[str, Any] = {"case_id": str(case), "task_type": task_type, "question_text": pair["question"], "answer_text": pair["answer"]}
    if task.endswith("hr_extremum"):
        kind = "max" if _HR_MAX.search(stem) else "min" if _HR_MIN.search(stem) else None
        if kind is None:
            raise Rejected("malformed", "HR extremum question names neither the maximum nor the minimum")
        params["hr_kind"] = kind
    if task in TOLERANCE_MS:
        params["tolerance_ms"] = TOLERANCE_MS[task]
    if task == "closed_diagnosis":
        params["framing"] = "negative" if _NEGATIVE.search(stem) else "positive"
    if options is not None:
        if len(set(options)) != len(options):
            raise Rejected("options", f"options repeat: {options!r}")
        canonical = closed_answer(answer, options)
    elif task == "closed_presence":
        canonical = _yes_no(answer)
    elif task.startswith("closed_"):
        raise Rejected("options", "closed question without inline options (A. ...; B. ...)")
    else:
        canonical, _ = _open_answer(task, answer, stem)
    finding = _finding(task, stem, canonical)
    return ReadItem(str(case), task_type, task, tag, stem, options, canonical, ANSWER_TYPES[task], finding, params)
