"""ECG-Reasoning-Benchmark samples: read them from a file or folder, check them, turn them into audit items.

ERB ships its samples two ways (see ``../shared/formats/ERB.md``):

* the released JSONL, one sample per line, with the **new** key names:
  ``data.reasoning[]`` loops of ``criterion_selection``, ``finding_identification``,
  ``ecg_grounding[]`` and ``diagnostic_decision``; every grounding ``answer`` is a
  list of option texts;
* older per-sample files ``data/<source>/<dx>/<id>.json`` with the **old** key
  names (``path_1``, ``finding``, ``grounding``, ``decision``; question types
  ``finding``/``decision``): wave and measurement answers are plain option
  texts, lead answers lists; the initial question may lack its ``answer``
  (``dx_label`` gives it) and offer "I don't know".

:func:`read_source` yields every sample with where it came from (file and
line); :func:`parse_sample` checks one and returns an :class:`ErbSample`, or
raises :class:`Rejected` with a code and a reason; :func:`item_json` turns it
into :class:`ecgtrace.contracts.AuditItem` JSON. Questions, options and
answers stay verbatim: "Lead V1", "[230ms - 240ms]", "Above 240ms" and
"[6th QRS wave - 7th QRS wave]" are asked and scored as written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecgtrace.errors import InteropError

#: ERB's 17 ``target_dx`` names -> ecgtrace's diagnosis graph ids (``rubrics/diagnoses``).
ERB_DIAGNOSES: dict[str, str] = {
    "first_degree_av_block": "first_degree_av_block", "second_degree_av_block": "second_degree_av_block",
    "third_degree_av_block": "third_degree_av_block", "premature_atrial_complex": "pac", "premature_ventricular_complex": "pvc",
    "complete_left_bundle_branch_block": "lbbb", "complete_right_bundle_branch_block": "rbbb",
    "left_anterior_fascicular_block": "lafb", "left_posterior_fascicular_block": "lpfb",
    "left_ventricular_hypertrophy": "lvh", "right_ventricular_hypertrophy": "rvh",
    "anterior_myocardial_infarction": "anterior_mi", "inferior_myocardial_infarction": "inferior_mi",
    "lateral_myocardial_infarction": "lateral_mi", "anterior_ischemia": "anterior_ischemia",
    "inferior_ischemia": "inferior_ischemia", "lateral_ischemia": "lateral_ischemia",
}
DATA_SOURCES: tuple[str, ...] = ("ptbxl", "mimic_iv_ecg")
#: Key names of a loop's steps, ``{style: {step: key}}``; ``loops`` is the list of loops under ``data``.
KEYS: dict[str, dict[str, str]] = {
    "new": {"loops": "reasoning", "criterion": "criterion_selection", "finding": "finding_identification",
            "grounding": "ecg_grounding", "decision": "diagnostic_decision"},
    "old": {"loops": "path_1", "criterion": "criterion_selection", "finding": "finding", "grounding": "grounding",
            "decision": "decision"},
}
#: ``question_type`` of each step, ``{style: {step: type}}``.
QUESTION_TYPES: dict[str, dict[str, str]] = {
    "new": {"initial": "initial_diagnostic_question", "criterion": "criterion_selection", "finding": "finding_identification",
            "decision": "diagnostic_decision"},
    "old": {"initial": "initial_diagnostic_question", "criterion": "criterion_selection", "finding": "finding", "decision": "decision"},
}
GROUNDING_TYPES: dict[str, str] = {"lead_grounding": "lead", "wave_grounding": "wave", "measurement_grounding": "measurement"}
_PATH_KEY = re.compile(r"^path_\d+$")


class Rejected(Exception):
    """A sample that cannot be imported: ``code`` (short, countable) and ``reason`` (one line, names the step)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class SourceSample:
    """One sample as found: ``obj`` (the parsed JSON, or None with ``error`` when the line is not JSON), its file and line."""

    file: str
    line: int | None
    obj: Any
    error: str | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file


@dataclass
class ErbSample:
    """A checked ERB sample: its metadata (verbatim), key style, and questions as ecgtrace shapes."""

    metadata: dict[str, Any]
    sample_id: str
    data_source: str
    ecg_id: str
    target_dx: str
    label: bool
    path_id: str
    style: str
    initial: dict[str, Any]
    loops: list[dict[str, Any]] = field(default_factory=list)

    @property
    def item_id(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"erb-{self.data_source}-{self.target_dx}-{self.sample_id}")

    @property
    def diagnosis(self) -> str:
        return ERB_DIAGNOSES.get(self.target_dx, self.target_dx)


# ------------------------------------------------------------------ reading

def read_source(path: str | Path) -> list[SourceSample]:
    """Every sample of an ERB JSONL file, a per-sample JSON file (or a list of samples), or a folder of them.

    Raises:
        InteropError: the path does not exist, holds no sample, or its first sample is not in ERB's format.
    """
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.rglob("*.json") if p.is_file())
        samples = [s for f in files for s in _read_json_file(f, f.relative_to(root).as_posix())]
    elif root.is_file():
        samples = _read_json_file(root, root.name) if root.suffix.lower() == ".json" else list(_read_jsonl(root))
    else:
        raise InteropError(f"{root}: no such file or folder")
    first = next((s for s in samples if s.error is None), None)
    if first is None:
        raise InteropError(f"{root}: no ERB sample found" + (f" ({samples[0].where}: {samples[0].error})" if samples else ""))
    if not looks_like_erb(first.obj):
        raise InteropError(f"{first.where}: not an ECG-Reasoning-Benchmark sample ({_shape(first.obj)}; an ERB sample is an object "
                           "with 'metadata' and 'data')" + _hint(first.obj))
    return samples


def _read_jsonl(path: Path) -> Iterator[SourceSample]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InteropError(f"{path}: cannot read ({exc})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield SourceSample(path.name, number, json.loads(line))
        except json.JSONDecodeError as exc:
            yield SourceSample(path.name, number, None, f"not valid JSON ({exc.msg})")


def _read_json_file(path: Path, name: str) -> list[SourceSample]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InteropError(f"{path}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        if path.suffix.lower() == ".json" and "\n{" in path.read_text(encoding="utf-8", errors="replace"):
            return list(_read_jsonl(path))  # a JSONL file named .json
        return [SourceSample(name, None, None, f"not valid JSON ({exc.msg})")]
    if isinstance(obj, list):
        return [SourceSample(f"{name}[{k}]", None, o) for k, o in enumerate(obj)]
    return [SourceSample(name, None, obj)]


def looks_like_erb(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) and isinstance(obj.get("data"), dict)


def _shape(obj: Any) -> str:
    if isinstance(obj, dict):
        return f"its keys are {', '.join(sorted(map(str, obj))[:6]) or 'none'}"
    return f"it is a JSON {type(obj).__name__}"


def _hint(obj: Any) -> str:
    if isinstance(obj, dict) and "loops" in obj and "initial" in obj:
        return "; it is an ecgtrace audit item already: run `ecgtrace audit` on the file"
    return ""


# ------------------------------------------------------------------ checking

def parse_sample(source: SourceSample) -> ErbSample:
    """Check one sample and return it in ecgtrace shapes; raises :class:`Rejected`."""
    if source.error is not None:
        raise Rejected("not_json", source.error)
    obj = source.obj
    if not looks_like_erb(obj):
        raise Rejected("not_erb", f"not an ERB sample ({_shape(obj)})")
    meta, data = obj["metadata"], obj["data"]
    sample_id = meta.get("id", Path(source.file).stem if source.line is None else None)
    if sample_id is None or str(sample_id).strip() == "":
        raise Rejected("malformed", "metadata.id is missing (export names result files by it)")
    data_source = _text(meta, "data_source", "metadata")
    if data_source not in DATA_SOURCES:
        raise Rejected("malformed", f"metadata.data_source {data_source!r} is not one of {', '.join(DATA_SOURCES)}")
    ecg_id = meta.get("ecg_id")
    if ecg_id is None or str(ecg_id).strip() == "":
        raise Rejected("malformed", "metadata.ecg_id is missing")
    target_dx = _text(meta, "target_dx", "metadata")
    style, loops_raw = _loops(data)
    initial = _initial(data, meta)
    loops = [_loop(raw, f"{KEYS[style]['loops']}[{n}]") for n, raw in enumerate(loops_raw)]
    path_idx = meta.get("path_idx", 0)
    return ErbSample(metadata=dict(meta), sample_id=str(sample_id).strip(), data_source=data_source, ecg_id=str(ecg_id).strip(),
                     target_dx=target_dx, label=initial.pop("label"), path_id=str(path_idx), style=style, initial=initial, loops=loops)


def _text(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise Rejected("malformed", f"{where}.{key} is missing or not text")
    return value.strip()


def _loops(data: dict[str, Any]) -> tuple[str, list[Any]]:
    """(key style, the list of loops): ``reasoning`` (new) or ``path_1`` (old; a lone ``path_N`` too)."""
    if "reasoning" in data:
        loops, style = data["reasoning"], "new"
    else:
        paths = sorted(k for k in data if _PATH_KEY.match(k))
        if not paths:
            raise Rejected("malformed", "data has no 'reasoning' (nor an older 'path_1') list of loops")
        loops, style = data["path_1" if "path_1" in paths else paths[0]], "old"
    if not isinstance(loops, list) or not loops:
        raise Rejected("malformed", "the sample has no reasoning loops")
    first = loops[0] if isinstance(loops[0], dict) else {}
    if style == "new" and "finding" in first and "finding_identification" not in first:
        style = "old"  # a 'reasoning' list with the old step names
    return style, loops


def _initial(data: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    raw = data.get("initial_diagnostic_question")
    if not isinstance(raw, dict):
        raise Rejected("malformed", "data.initial_diagnostic_question is missing")
    label = meta.get("dx_label")
    if isinstance(label, int) and not isinstance(label, bool) and label in (0, 1):
        label = bool(label)
    if label is not None and not isinstance(label, bool):
        raise Rejected("malformed", f"metadata.dx_label {label!r} is not true or false")
    if raw.get("answer") is None:
        if label is None:
            raise Rejected("malformed", "initial_diagnostic_question has no answer and metadata has no dx_label")
        raw = {**raw, "answer": "Yes" if label else "No"}  # older files: the label is the answer
    question = _question(raw, "initial_diagnostic_question")
    if question["answer"] not in ("Yes", "No"):
        raise Rejected("malformed", f"initial_diagnostic_question: answer {question['answer']!r} is neither Yes nor No")
    if label is not None and (question["answer"] == "Yes") != label:
        raise Rejected("label_mismatch", f"initial answer {question['answer']!r} contradicts metadata.dx_label {str(label).lower()}")
    return {**question, "label": question["answer"] == "Yes"}


def _step(loop: dict[str, Any], step: str, where: str) -> tuple[Any, str]:
    """(the step, where it is: ``reasoning[1].ecg_grounding``) under its new or its old key."""
    for style in ("new", "old"):
        if KEYS[style][step] in loop:
            return loop[KEYS[style][step]], f"{where}.{KEYS[style][step]}"
    raise Rejected("malformed", f"{where}: no {KEYS['new'][step]} (or {KEYS['old'][step]}) step")


def _loop(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise Rejected("malformed", f"{where} is not an object")
    groundings, at = _step(raw, "grounding", where)
    if not isinstance(groundings, list):
        raise Rejected("malformed", f"{at} is not a list")
    return {"criterion": _question(*_step(raw, "criterion", where)), "finding": _question(*_step(raw, "finding", where)),
            "grounding": [_grounding(g, f"{at}[{k}]") for k, g in enumerate(groundings)],
            "decision": _question(*_step(raw, "decision", where))}


def _options(raw: dict[str, Any], where: str) -> list[str]:
    options = raw.get("options")
    if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) and o.strip() for o in options):
        raise Rejected("malformed", f"{where}: options must be a list of at least 2 texts")
    seen: set[str] = set()
    for option in options:
        if option in seen:
            raise Rejected("options_repeat", f"{where}: option {option!r} appears more than once in {options!r}")
        seen.add(option)
    return list(options)


def _check_answers(answers: list[Any], options: list[str], idx: Any, where: str) -> list[str]:
    for answer in answers:
        if not isinstance(answer, str) or answer not in options:
            raise Rejected("answer_not_in_options", f"{where}: answer {answer!r} is not among the options {options!r}")
    if len(set(answers)) != len(answers):
        raise Rejected("malformed", f"{where}: answer repeats an option ({answers!r})")
    if idx is not None:
        indices = idx if isinstance(idx, list) else [idx]
        named = [options[i] if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(options) else None for i in indices]
        if sorted(map(str, named)) != sorted(answers):
            raise Rejected("answer_idx_mismatch", f"{where}: answer_idx {idx!r} names {named!r}, not the answer {answers!r}")
    return answers


def _question_and_options(raw: Any, where: str) -> tuple[str, list[str]]:
    if not isinstance(raw, dict):
        raise Rejected("malformed", f"{where} is missing or not an object")
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise Rejected("malformed", f"{where}: no question text")
    return question, _options(raw, where)


def _question(raw: Any, where: str) -> dict[str, Any]:
    question, options = _question_and_options(raw, where)
    answer = raw.get("answer")
    if isinstance(answer, list):  # a one-answer question written as a list
        if len(answer) != 1:
            raise Rejected("malformed", f"{where}: a single-answer question has {len(answer)} answers")
        answer = answer[0]
    _check_answers([answer], options, raw.get("answer_idx"), where)
    return {"question": question, "options": options, "answer": answer}


def _grounding(raw: Any, where: str) -> dict[str, Any]:
    kind = GROUNDING_TYPES.get(str(raw.get("question_type"))) if isinstance(raw, dict) else None
    if isinstance(raw, dict) and kind is None:
        raise Rejected("malformed", f"{where}: question_type {raw.get('question_type')!r} is not one of {', '.join(GROUNDING_TYPES)}")
    question, options = _question_and_options(raw, where)
    answer = raw.get("answer")
    answers = answer if isinstance(answer, list) else [answer]
    if not answers:
        raise Rejected("malformed", f"{where}: no answer")
    _check_answers(answers, options, raw.get("answer_idx"), where)
    multi = kind == "lead" or len(answers) > 1  # lead questions are "select all"; a wave with two true spans too
    ordered = [o for o in options if o in answers]
    return {"kind": kind, "question": question, "options": options, "answer": ordered if multi else answers[0], "multi": multi}


# ------------------------------------------------------------------ the audit item

def item_json(sample: ErbSample, *, record: dict[str, Any], assets: dict[str, str], provenance: dict[str, Any]) -> dict[str, Any]:
    """The :class:`ecgtrace.contracts.AuditItem` JSON of a checked sample (the whole record is the window)."""
    return {"id": sample.item_id, "record": record, "window": {"t0_s": 0.0, "t1_s": record["duration_s"]},
            "diagnosis": sample.diagnosis, "label": sample.label, "path_id": sample.path_id, "initial": dict(sample.initial),
            "loops": [dict(loop) for loop in sample.loops], "assets": {"image": assets.get("image"), "text": assets.get("text")},
            "provenance": provenance}
