"""Answers a model already gave, replayed: score them, or score a run again after a scorer fix, without asking any model.

``ecgtrace qa-eval DATASET --answers FILE`` and ``ecgtrace audit DATASET
--answers FILE`` read ``FILE`` with :func:`read_answers` and examine the
dataset with a :class:`ReplayExaminee`, which answers each turn from what was
recorded; everything else (messages, scoring, results) is the live pipeline,
so a run's own answers give its ``results.json`` again byte for byte.

``FILE`` is one of:

* a run folder, or its ``samples.jsonl``: every turn's reply is replayed as it
  came back (raw text, reasoning, tokens, latency, server error, attempts),
  and so is the judge's reply; the run's header says which dataset and
  settings the answers belong to (:attr:`RecordedAnswers.header`);
* JSON Lines of ``{"id": ..., "answer": "..."}`` (a QA item id; an audit
  sample takes ``"answers": [...]``, one per turn);
* Holtercare-style items, a JSON list or JSON Lines of ``{"id", "task_type",
  "qa_pair": {"question", "answer"}}``: the answer is ``qa_pair.answer``;
  ``id`` is an item id or, for items imported with ``ecgtrace import
  holtercare``, the patient case, whose item is found by its question.

A turn with no recorded answer is answered with an error ("no recorded
answer"), scored wrong, never skipped.

Answers to items that ``ecgtrace import holtercare`` left out of the dataset
(its ``rejected.jsonl``; or, when the answers file is the imported file itself,
the items past its ``--limit``) belong to no item: they are left out and
counted (:attr:`RecordedAnswers.left_out`, kept in the run's settings), so
that Holtercare's own file can be fed back as its answers. Any other answer
that fits no item is an error.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ecgtrace.agents.exam.examinees.base import Examinee, Reply
from ecgtrace.errors import EcgTraceError

NO_ANSWER = "no recorded answer for this turn"


class AnswersError(EcgTraceError):
    """An answers file cannot be read, or does not belong to the dataset."""


@dataclass
class RecordedAnswers:
    """Replies by ``(sample id, turn index)``, the judge's replies by sample id, and where they came from.

    A sample id is the sample row's ``id``: the item id in epoch 0, ``<item id>#<epoch>`` later
    (:func:`ecgtrace.contracts.runs.sample_key`). ``skipped``: the skip record of each sample the
    recorded run did not ask (token budget, encoding), so the replay skips it again; ``rows``: the
    recorded run's sample rows (which items, which epochs).
    """

    path: Path
    sha256: str
    replies: dict[tuple[str, int], Reply] = field(default_factory=dict)
    judged: dict[str, dict[str, Any]] = field(default_factory=dict)
    prompts: dict[tuple[str, int], str] = field(default_factory=dict)
    header: dict[str, Any] | None = None
    skipped: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: answers left out because the import left their item out: ``{why: count}``
    left_out: dict[str, int] = field(default_factory=dict)

    @property
    def from_run(self) -> bool:
        return self.header is not None

    def epochs(self) -> int:
        """How many epochs the recorded run asked (1 for an answers file that is no run)."""
        return 1 + max((int(r.get("epoch") or 0) for r in self.rows), default=0)

    def item_ids(self) -> set[str]:
        """The items the recorded run examined (its samples' item ids)."""
        from ecgtrace.contracts.runs import item_id_of

        return {item_id_of(r) for r in self.rows}

    def describe(self) -> dict[str, Any]:
        """What a run keeps in its settings about the answers it replayed."""
        return {"path": str(self.path), "sha256": self.sha256, "from_run": self.header["run_id"] if self.header else None,
                "answers": len(self.replies), "left_out": dict(sorted(self.left_out.items()))}


def _turn_reply(turn: dict[str, Any]) -> Reply:
    return Reply(raw=turn.get("raw"), reasoning=turn.get("reasoning"), usage=turn.get("tokens"), latency_ms=float(turn.get("latency_ms") or 0.0),
                 error=turn.get("error"), attempts=int(turn.get("attempts") or 1), meta=turn.get("meta"))


def _lines(path: Path) -> list[tuple[int, Any]]:
    """``(line or position, object)`` of a JSON list or JSON Lines file."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # one error line naming where, not a traceback
        line = data[: exc.start].count(b"\n") + 1
        raise AnswersError(f"--answers {path}:{line}: not UTF-8 text") from None
    if text.lstrip().startswith("["):
        try:
            return list(enumerate(json.loads(text), start=1))
        except ValueError as exc:
            raise AnswersError(f"--answers {path}: not valid JSON ({exc})") from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                out.append((number, json.loads(line)))
            except ValueError:
                raise AnswersError(f"--answers {path}:{number}: not valid JSON") from None
    return out


def _run_answers(answers: RecordedAnswers, rows: list[tuple[int, Any]]) -> None:
    for number, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("turns"), list):
            raise AnswersError(f"--answers {answers.path}:{number}: not a sample of a run (no 'turns')")
        answers.rows.append(row)
        if row.get("skipped"):
            answers.skipped[str(row["id"])] = row["skipped"]
            continue
        for turn in row["turns"]:
            if turn.get("asked", True):
                answers.replies[(str(row["id"]), int(turn["index"]))] = _turn_reply(turn)
                if turn.get("prompt") is not None:
                    answers.prompts[(str(row["id"]), int(turn["index"]))] = turn["prompt"]
        if isinstance(row.get("judge"), dict):
            answers.judged[str(row["id"])] = row["judge"]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _case_index(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    cases: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        case = ((item.get("provenance") or {}).get("params") or {}).get("case_id")
        if case is not None:
            cases.setdefault(str(case), []).append(item)
    return cases


def _holtercare_target(number: int, row: dict[str, Any], ids: set[str], cases: dict[str, list[dict[str, Any]]], path: Path) -> str:
    """The item id a Holtercare-style answer belongs to: its id, or its case's item with the same question."""
    key = str(row.get("id"))
    if key in ids:
        return key
    question = _norm(str((row.get("qa_pair") or {}).get("question", "")))
    candidates = [it for it in cases.get(key, []) if row.get("task_type") in (None, it["provenance"]["params"].get("task_type"))]
    matched = [it for it in candidates if question and question in (_norm(it["provenance"]["params"].get("question_text", "")), _norm(it["question"]))]
    chosen = matched if matched else (candidates if len(candidates) == 1 else [])
    if len(chosen) != 1:
        why = "no item of the dataset" if not candidates else f"{len(candidates)} items of case {key!r} and the question matches {len(matched)}"
        raise AnswersError(f"--answers {path}:{number}: answer for {key!r} fits {why}")
    return str(chosen[0]["id"])


@dataclass(frozen=True)
class NotImported:
    """What an import left out of a dataset folder: its source file's SHA-256, how many items it read, what it rejected."""

    source_sha256: str | None = None
    n_read: int | None = None
    rejected_index: frozenset[int] = frozenset()
    rejected_questions: frozenset[tuple[str, str]] = frozenset()  # (case id, normalised question)

    @classmethod
    def of_dataset(cls, folder: str | Path) -> NotImported:
        """Read ``manifest.json`` and ``rejected.jsonl`` of an imported dataset folder (nothing where there are none)."""
        base = Path(folder)
        manifest = _json_file(base / "manifest.json")
        rows = [json.loads(line) for line in _text(base / "rejected.jsonl").splitlines() if line.strip()]
        rows = [r for r in rows if isinstance(r, dict)]
        return cls(source_sha256=manifest.get("source_sha256") if isinstance(manifest, dict) else None,
                   n_read=manifest.get("n_read") if isinstance(manifest, dict) else None,
                   rejected_index=frozenset(int(r["index"]) for r in rows if isinstance(r.get("index"), int)),
                   rejected_questions=frozenset((str(r.get("case_id")), _norm(r["question"])) for r in rows if isinstance(r.get("question"), str)))

    def why(self, position: int, row: Any, same_file: bool) -> str | None:
        """Why the answer at ``position`` (0-based) of the answers file has no item, or None when it should have one."""
        if same_file and position in self.rejected_index:
            return "rejected at import"
        if same_file and self.n_read is not None and position >= self.n_read:
            return "not imported (--limit)"
        pair = row.get("qa_pair") if isinstance(row, dict) else None
        if isinstance(pair, dict) and isinstance(pair.get("question"), str) and (str(row.get("id")), _norm(pair["question"])) in self.rejected_questions:
            return "rejected at import"
        return None


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _json_file(path: Path) -> Any:
    try:
        return json.loads(_text(path) or "null")
    except ValueError:
        return None


def _plain_answers(answers: RecordedAnswers, rows: list[tuple[int, Any]], items: list[dict[str, Any]], not_imported: NotImported) -> None:
    ids, cases = {str(it["id"]) for it in items}, _case_index(items)
    same_file = not_imported.source_sha256 == answers.sha256
    for position, (number, row) in enumerate(rows):
        why = not_imported.why(position, row, same_file)
        if why is not None:
            answers.left_out[why] = answers.left_out.get(why, 0) + 1
            continue
        if not isinstance(row, dict) or "id" not in row:
            raise AnswersError(f"--answers {answers.path}:{number}: expected an object with an 'id'")
        if isinstance(row.get("qa_pair"), dict):
            target, texts = _holtercare_target(number, row, ids, cases, answers.path), [row["qa_pair"].get("answer")]
        elif isinstance(row.get("answers"), list):
            target, texts = str(row["id"]), row["answers"]
        elif "answer" in row:
            target, texts = str(row["id"]), [row["answer"]]
        else:
            raise AnswersError(f"--answers {answers.path}:{number}: no 'answer', 'answers' or 'qa_pair.answer'")
        if target not in ids:
            raise AnswersError(f"--answers {answers.path}:{number}: id {target!r} is no item of the dataset")
        for index, text in enumerate(texts):
            if (target, index) in answers.replies:
                raise AnswersError(f"--answers {answers.path}:{number}: a second answer for {target!r}")
            answers.replies[(target, index)] = Reply(raw=None, error="answer is not text") if not isinstance(text, str) else Reply(raw=text)


def read_answers(path: str | Path, items: list[dict[str, Any]], *, dataset_dir: str | Path | None = None) -> RecordedAnswers:
    """Read an answers file (see the module docstring) for the dataset ``items`` (plain JSON).

    ``dataset_dir``: the dataset's folder, whose ``rejected.jsonl`` / ``manifest.json`` (written by an import)
    say which answers belong to items the import left out.

    Raises:
        AnswersError: missing or unreadable file, a line that fits no item, two answers for one.
    """
    target = Path(path)
    if target.is_dir():
        target = target / "samples.jsonl"
    if not target.is_file():
        raise AnswersError(f"--answers {path}: no such file (a run folder, its samples.jsonl, or a JSON Lines file of answers)")
    answers = RecordedAnswers(path=target, sha256=hashlib.sha256(target.read_bytes()).hexdigest())
    rows = _lines(target)
    header = target.parent / "header.json"
    if rows and isinstance(rows[0][1], dict) and isinstance(rows[0][1].get("turns"), list):
        if header.is_file():
            from ecgtrace.runlog import read_header

            answers.header = read_header(target.parent)
        _run_answers(answers, rows)
    else:
        _plain_answers(answers, rows, items, NotImported.of_dataset(dataset_dir) if dataset_dir is not None else NotImported())
    if not answers.replies and not answers.skipped:
        raise AnswersError(f"--answers {target}: no answers")
    return answers


class ReplayExaminee(Examinee):
    """Answers every turn with the reply recorded for it (an error where none was)."""

    def __init__(self, answers: RecordedAnswers, name: str = "replay") -> None:
        self.answers, self.name = answers, name

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        recorded = self.answers.replies.get((str(turn.get("sample_key") or turn["sample_id"]), int(turn["index"])))
        return replace(recorded) if recorded is not None else Reply(raw=None, error=NO_ANSWER)


class ReplayJudge(Examinee):
    """Gives the judge's recorded reply for a sample back, so its verdict is read again, not asked again."""

    def __init__(self, answers: RecordedAnswers) -> None:
        self.answers = answers
        names = {str(v.get("judge")) for v in answers.judged.values() if v.get("judge")}
        self.name = names.pop() if len(names) == 1 else "judge"

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        verdict = self.answers.judged.get(str(turn["sample_id"]))
        if verdict is None:
            return Reply(raw=None, error=NO_ANSWER)
        return Reply(raw=verdict.get("raw"), usage=verdict.get("tokens"), latency_ms=float(verdict.get("latency_ms") or 0.0),
                     error=verdict.get("error"))
