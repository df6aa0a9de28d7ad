"""The run folder's contracts: its header, one scored turn, one finished sample.

A run folder (``ecgtrace audit`` / ``ecgtrace qa-eval``) holds ``header.json``
(:class:`RunHeader`), ``samples.jsonl`` (one :class:`AuditSample` or
:class:`QASample` per line, each with its :class:`TurnRow` list) and
``results.json``. The header says what kind of run it is, so no reader has
to guess from the rows.

Format 1 headers (``ecgtrace-audit-run/1``, written before the header named
its kind) are still read: an identity with ``kind: "qa"`` was a QA run, any
other an audit. Format 3 (``ecgtrace-run/3``) adds the kind ``probe``
(counterfactual probes, :mod:`ecgtrace.contracts.probe`); audit and QA runs
still write format 2, so versions that read only format 2 keep reading them,
and refuse a probe run by its format instead of misreading it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

RUN_FORMAT = "ecgtrace-run/2"
#: The header format that introduced the ``probe`` kind.
PROBE_RUN_FORMAT = "ecgtrace-run/3"
#: Header formats this version reads.
READABLE_RUN_FORMATS: tuple[str, ...] = ("ecgtrace-audit-run/1", RUN_FORMAT, PROBE_RUN_FORMAT)
#: The format a new header of each kind is written in (the oldest that can hold it).
RUN_FORMAT_OF_KIND: dict[str, str] = {"audit": RUN_FORMAT, "qa": RUN_FORMAT, "probe": PROBE_RUN_FORMAT}

RunKind = Literal["audit", "qa", "probe"]


class RunHeader(BaseModel):
    """``header.json``: written once when a run starts.

    ``identity`` holds everything that decides the results (dataset SHA-256,
    model, modality, mode, seed, limit, prompt and scoring versions): reopening
    a folder with another identity is refused. ``settings`` may change between
    resumes (concurrency, timeout, base URL, the *name* of the API-key
    variable, never the key).
    """

    model_config = ConfigDict(extra="allow")

    format: str = RUN_FORMAT
    kind: RunKind
    run_id: str = Field(min_length=1)
    identity: dict[str, Any]
    settings: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, Any] = Field(default_factory=dict)
    created_utc: str | None = None
    #: The audit metric definitions in force when the run began (:data:`ecgtrace.metrics.METRICS_VERSION`);
    #: audit headers written before it was recorded began under version 1. None for QA runs.
    metrics_version: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _v1_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and "kind" not in data:
            identity = data.get("identity") if isinstance(data.get("identity"), dict) else {}
            data = {**data, "kind": "qa" if identity.get("kind") == "qa" else "audit"}
        if isinstance(data, dict) and "format" not in data:  # a new header: the format its kind needs
            data = {**data, "format": RUN_FORMAT_OF_KIND.get(str(data.get("kind")), RUN_FORMAT)}
        if isinstance(data, dict) and data.get("kind") == "audit" and data.get("metrics_version") is None:
            data = {**data, "metrics_version": "1"}
        return data

    @model_validator(mode="after")
    def _readable(self) -> RunHeader:
        if self.format not in READABLE_RUN_FORMATS:
            raise ValueError(f"unknown run format {self.format!r} (this version reads {', '.join(READABLE_RUN_FORMATS)})")
        if self.kind == "probe" and self.format != PROBE_RUN_FORMAT:
            raise ValueError(f"a probe run needs header format {PROBE_RUN_FORMAT}, got {self.format!r}")
        return self

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class TurnRow(BaseModel):
    """One turn as ``samples.jsonl`` keeps it: what was asked, what came back, how it scored.

    ``asked`` is False for turns a ``stop``-mode chain never reached (then
    ``correct`` is None). ``parsed`` is the answer read from ``raw`` (an option
    text, a list of them, or the value an open question's scorer read);
    ``parse_reason`` says why reading failed. ``score`` (0-100) and
    ``details`` are set by QA scoring; ``error`` holds a server failure after
    retries (the turn is then scored wrong).
    """

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0)
    stage: str
    loop: int | None = None
    kind: str | None = None
    asked: bool = True
    prompt: str | None = None
    raw: str | None = None
    reasoning: str | None = None
    parsed: Any = None
    parse_ok: bool = False
    parse_reason: str | None = None
    answer: str | list[str]
    correct: bool | None = None
    score: float | None = None
    details: dict[str, Any] | None = None
    latency_ms: float | None = None
    tokens: dict[str, Any] | None = None
    error: str | None = None
    attempts: int | None = None
    meta: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class SkipRecord(BaseModel):
    """Why a sample was not asked: its prompt would not fit the token budget, or its ECG cannot be written as text.

    A skipped sample has a row in ``samples.jsonl`` (so the run says what
    happened to every item) but no answered turns; metrics leave it out and
    ``results.json`` counts it. A resumed run checks skipped samples again
    (the budget or the server may have changed), so they never block a rerun.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["token_budget", "encoding"]
    reason: str = Field(min_length=1)
    prompt_tokens: int | None = None  # the longest request the sample needs, estimated (tokens)
    budget_tokens: int | None = None  # the prompt budget it was checked against
    text_encoding: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class AuditSample(BaseModel):
    """A finished reasoning-audit sample (``epoch`` > 0: a repeat with the options shuffled; ``id`` is then ``<item id>#<epoch>``)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    kind: Literal["audit"] = "audit"
    epoch: int = Field(default=0, ge=0)
    diagnosis: str
    label: bool
    path_id: str
    mode: str
    turns: list[TurnRow]
    skipped: SkipRecord | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class QASample(BaseModel):
    """A finished QA sample: one turn, its score and, optionally, the judge's verdict (a skipped sample: its unasked turn)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    kind: Literal["qa"] = "qa"
    epoch: int = Field(default=0, ge=0)
    task: str
    template_id: str | None = None
    answer_type: str | None = None
    family: str
    finding: str | None = None
    split: str | None = None
    score: float
    correct: bool | None = None
    turns: list[TurnRow] = Field(min_length=1, max_length=1)
    judge: dict[str, Any] | None = None
    item: dict[str, Any]
    skipped: SkipRecord | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def sample_key(item_id: str, epoch: int = 0) -> str:
    """The ``id`` of a sample row: the item's id in epoch 0, ``<item id>#<epoch>`` in later epochs."""
    return item_id if not epoch else f"{item_id}#{int(epoch)}"


def examined_sample(row: dict[str, Any]) -> dict[str, Any]:
    """The sample a run row holds: a probe row's inner ``sample`` (:class:`~ecgtrace.contracts.ProbeSample`), else the row itself.

    The one place that knows where a row keeps its ``turns``, ``judge`` and ``skipped``.
    """
    inner = row.get("sample")
    return inner if isinstance(inner, dict) else row


def item_id_of(row: dict[str, Any]) -> str:
    """The item a sample row examined (its ``id`` without the epoch suffix)."""
    epoch = int(row.get("epoch") or 0)
    suffix = f"#{epoch}"
    return row["id"][: -len(suffix)] if epoch and row["id"].endswith(suffix) else row["id"]


def answered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of samples that were asked (skipped samples left out): what metrics are computed on."""
    return [row for row in rows if not row.get("skipped")]


def sample_model(kind: str) -> type[AuditSample] | type[QASample]:
    """The sample row model of a run kind (a probe run's rows, :class:`ecgtrace.contracts.ProbeSample`, wrap one of these)."""
    return QASample if kind == "qa" else AuditSample
