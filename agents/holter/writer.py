"""Write QA items for one template and its planned targets; answers are computed, never generated.

Each target goes to the template's task type (:mod:`ecgtrace.agents.holter.tasks`),
whose ``write`` computes the answer, evidence and distractors; this module
adds what every item has (id, question text from a stem, record, finding,
provenance) and validates the public part as a :class:`~ecgtrace.contracts.QAItem`.

Items leave the writer without ``split``, ``modalities`` and ``messages``
(added later) and with closed-question distractors not yet mixed with the
answer: :func:`ecgtrace.agents.holter.dataset.finalize` places answers so that their
positions are balanced across the whole dataset. Keys starting with ``_``
are working data for the verifier and renderer and never reach ``qa.jsonl``.
"""

from __future__ import annotations

import random
import re
from typing import Any

from ecgtrace.agents.holter.assets import hourly_text
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.tasks import WriteContext, get_task
from ecgtrace.agents.holter.windows import rng_for
from ecgtrace.contracts.common import provenance
from ecgtrace.contracts.qa import QAItem
from ecgtrace.rubrics.template_schema import QATemplate, safe_format

WRITER_VERSION = "1"


def indefinite_article(number: int) -> str:
    """``"an"`` before an age said with a vowel sound (8, 11, 18, 80-89), else ``"a"``: never "a 82-year-old"."""
    spoken = str(abs(int(number)))
    return "an" if spoken in ("8", "11", "18") or (len(spoken) == 2 and spoken[0] == "8") else "a"


def patient_context(patient: dict[str, Any], duration_ms: int) -> str:
    """``"Holter ECG of a 59-year-old female patient. "``; absent fields are left out, never guessed."""
    kind = "Holter ECG" if duration_ms >= 3_600_000 else "ECG recording"
    age, sex = patient.get("age_years"), patient.get("sex")
    words = []
    if isinstance(age, int) and 0 < age < 130:
        words.append(f"{age}-year-old")
    if sex in ("male", "female"):
        words.append(sex)
    if not words:
        return f"{kind}. "
    article = indefinite_article(age) if isinstance(age, int) and 0 < age < 130 else "a"
    return f"{kind} of {article} {' '.join(words)} patient. "


#: Holtercare's patient line and two rewordings: ``{a}`` is the article that fits the age.
PATIENT_LINES = ("This case concerns {a} {age}-year-old {sex} patient. ", "The patient is {a} {age}-year-old {sex}. ",
                 "This recording comes from {a} {age}-year-old {sex} patient. ")


def patient_line(patient: dict[str, Any], duration_ms: int, rng: random.Random) -> str:
    """``"This case concerns a 20-year-old male patient. "`` (wording drawn from :data:`PATIENT_LINES`) when age and sex
    are known; otherwise :func:`patient_context`, which leaves out what is unknown."""
    age, sex = patient.get("age_years"), patient.get("sex")
    if isinstance(age, int) and 0 < age < 130 and sex in ("male", "female"):
        return PATIENT_LINES[rng.randrange(len(PATIENT_LINES))].format(a=indefinite_article(age), age=age, sex=sex)
    return patient_context(patient, duration_ms)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def _stem_values(facts: Facts, template: QATemplate, context: str, lead: str | None, written: dict[str, Any]) -> dict[str, Any]:
    """Every stem field (:data:`~ecgtrace.rubrics.template_schema.PLACEHOLDERS`), blank unless the task's writer set it
    (``patient`` is filled once the stem is chosen)."""
    hours = facts.duration_ms / 3_600_000
    return {"context": context, "patient": "", "duration_h": f"{hours:.0f}" if facts.duration_ms >= 3_600_000 else f"{hours:.1f}",
            "event": "", "event_plural": "", "t0_ms": "", "t1_ms": "", "t0_s": "", "t1_s": "", "window_s": f"{template.window_s:g}",
            "hr_kind": "", "diagnosis": "", "lead": lead or "", **written.pop("_values", {})}


def _provenance(facts: Facts, template: QATemplate, target: dict[str, Any], seed: int) -> dict[str, Any]:
    annotation = {key: str(facts.provenance.get(key, "")) for key in ("source", "method", "version")}
    return provenance(facts.source, f"ecgtrace.agents.writer:{template.task}", WRITER_VERSION,
                      {"template_id": template.id, "template_version": template.version, "seed": seed, "annotation": annotation,
                       "tolerance_ms": template.answer.tolerance_ms, "kind": target.get("kind"), "hr_kind": target.get("hr_kind")})


def _item(facts: Facts, template: QATemplate, target: dict[str, Any], k: int, question: str, written: dict[str, Any], seed: int) -> dict[str, Any]:
    """The public part as a validated :class:`QAItem` dump, plus the task writer's working keys."""
    record = dict(facts.record)
    public = QAItem(id=f"{_slug(record['db'])}-{_slug(record['id'])}-{template.id}-{k:03d}", task=template.task, template_id=template.id,
                    finding=target.get("kind"), record=record, window=written.pop("window"), question=question, answer=written.pop("answer"),
                    answer_type=template.answer.format, evidence=written.pop("evidence"), provenance=_provenance(facts, template, target, seed))
    return {**public.to_json(), **written, "_target": target, "_format": template.format}


def write_items(facts: Facts, template: QATemplate, targets: list[dict[str, Any]], *, seed: int, measure: bool = True) -> list[dict[str, Any]]:
    """One item per target (a target the task cannot answer yields none)."""
    task = get_task(template.task)
    record = facts.record
    lead = record["leads"][0] if record["leads"] else None
    context = patient_context(facts.patient, facts.duration_ms)
    items = []
    for k, target in enumerate(targets):
        rng = rng_for(seed, record["db"], record["id"], template.id, k)
        written = task.write(WriteContext(facts, template, target, rng, lead, measure))
        if written is None:
            continue
        values = _stem_values(facts, template, context, lead, written)
        stem = template.stems[rng.randrange(len(template.stems))]
        if "{patient}" in stem:
            values["patient"] = patient_line(facts.patient, facts.duration_ms, rng)
        question = re.sub(r"\s{2,}", " ", safe_format(stem, values)).strip()
        item = _item(facts, template, target, k, question, written, seed)
        if item["window"] is None:
            spans = ", ".join(f"{a}-{b} ms" for a, b in item["_display_ms"])
            item["_context_text"] = hourly_text(facts) + (f"Attached ECG windows (ms from the recording start): {spans}\n" if spans else "")
        items.append(item)
    return items
