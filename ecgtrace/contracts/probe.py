"""Counterfactual probes: a probe set's pairs (``pairs.jsonl``) and a probe run's sample rows.

A probe set (``ecgtrace probe``, :mod:`ecgtrace.agents.probe`) is a folder::

    probe.json          ProbeManifest: the source dataset, kinds, kept/dropped counts with reasons
    pairs.jsonl         one ProbePair per counterfactual built, kept or dropped (with why)
    audit.jsonl         the originals and the kept counterfactuals (AuditItem lines, assets below)
    qa.jsonl            the same for QA items (QAItem lines)
    windows/<id>.npz    every shown window as a signal file (edited ones included), see tools.counterfactual.save_window
    assets/<id>.png     ECG paper and signal text of every window, drawn by the dataset's own renderers
    assets/<id>.txt

A probe run folder holds the usual ``header.json`` (kind ``probe``, format
``ecgtrace-run/3``), ``samples.jsonl`` (one :class:`ProbeSample` per examined
item: the audit or QA sample it would be in its own run, plus its role) and
``results.json`` (the paired metrics of :mod:`ecgtrace.agents.probe.metrics`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ecgtrace.contracts.common import Provenance
from ecgtrace.contracts.runs import sample_model
from ecgtrace.contracts.vocabulary import COUNTERFACTUAL_KINDS

PROBE_PAIR_FORMAT = "ecgtrace-probe-pair/1"
PROBE_SET_FORMAT = "ecgtrace-probe-set/1"

CounterfactualKind = Literal["remove", "move", "swap", "control"]
#: What a paired turn's answer should do on the counterfactual: change (the evidence is gone or opposite),
#: stay the same (nothing relevant changed), or follow the moved evidence to its new place.
Expectation = Literal["change", "same", "follow"]


class TurnPair(BaseModel):
    """One question asked of both windows: its turn index in each item's plan and what its answer should do."""

    model_config = ConfigDict(extra="forbid")

    stage: str
    kind: str | None = None
    original: int = Field(ge=0)
    counterfactual: int = Field(ge=0)
    expect: Expectation
    original_answer: str | list[str]
    counterfactual_answer: str | list[str]


class ProbePair(BaseModel):
    """One counterfactual of one item (a line of ``pairs.jsonl``); dropped ones say why and have no item."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["ecgtrace-probe-pair/1"] = PROBE_PAIR_FORMAT
    id: str = Field(min_length=1)
    kind: CounterfactualKind
    source: Literal["audit", "qa"]
    original: str = Field(min_length=1)
    status: Literal["kept", "dropped"]
    reason: str | None = None
    group: str
    finding: str | None = None
    edit: dict[str, Any] | None = None
    before: dict[str, Any] = Field(default_factory=dict)
    after: dict[str, Any] = Field(default_factory=dict)
    turns: list[TurnPair] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)
    provenance: Provenance

    @model_validator(mode="after")
    def _kept_or_why(self) -> ProbePair:
        if self.kind not in COUNTERFACTUAL_KINDS:
            raise ValueError(f"unknown counterfactual kind {self.kind!r}")
        if self.status == "dropped" and not self.reason:
            raise ValueError("a dropped counterfactual needs its reason")
        if self.status == "kept" and not self.turns:
            raise ValueError("a kept counterfactual pairs at least one turn")
        return self

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ProbeManifest(BaseModel):
    """``probe.json``: what the probe set was built from and how many counterfactuals were kept or dropped, and why."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["ecgtrace-probe-set/1"] = PROBE_SET_FORMAT
    dataset: dict[str, Any]
    kinds: list[CounterfactualKind]
    seed: int
    limit: int | None = None
    n_originals: int
    n_pairs: int
    counts: dict[str, Any]
    provenance: Provenance

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ProbeSample(BaseModel):
    """A finished item of a probe run: the audit or QA sample row it would be in its own run, and its role.

    ``pair`` says where its counterpart is, for viewers that show a pair on a
    sample (paths relative to ``probe_set``, the probe set folder)::

        counterfactual: {"probe_set", "pair": <pair id>, "kind", "original": <id>,
                         "image", "original_image", "window", "original_window", "edit_spans_ms"}
        original:       {"probe_set", "counterfactuals": [<ids>], "image", "window"}
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    kind: Literal["probe"] = "probe"
    epoch: int = Field(default=0, ge=0)  # --epochs: the id is the item's id with "#<epoch>" after epoch 0
    source: Literal["audit", "qa"]
    role: Literal["original", "counterfactual"]
    sample: dict[str, Any]
    pair: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _sample_matches(self) -> ProbeSample:
        sample_model(self.source).model_validate(self.sample)
        if self.sample.get("id") != self.id:
            raise ValueError(f"sample id {self.sample.get('id')!r} is not the row id {self.id!r}")
        return self

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
