"""One home for the names that cross the layers: event kinds, rhythm notes, modalities, stages.

Before this module the same vocabularies were written out in several places
with different contents (the rhythm detector's event kinds and the templates'
targets disagreed; the synthetic generator and the annotation store each kept
their own rhythm notes; three tuples named the modalities). Every layer now
reads them from here, so a new event kind is added once.

An :class:`EventKind` says what an event is called in questions and answers,
which WFDB rhythm aux note marks it (``(AFIB``, without the parenthesis), and
how long it lasts (:data:`SPANS`), which decides how QA windows are placed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: ``beat``: one beat; ``run``: consecutive beats (couplets, runs, pauses);
#: ``pattern``: a repeating ectopy pattern that may cover a whole window;
#: ``episode``: a rhythm lasting minutes (a window is placed inside it).
SPANS = ("beat", "run", "pattern", "episode")
Span = Literal["beat", "run", "pattern", "episode"]


@dataclass(frozen=True)
class EventKind:
    """One kind of rhythm event.

    Attributes:
        name: the identifier used everywhere (``"pvc"``).
        singular, plural: the wording in questions ("premature ventricular contraction (PVC)").
        diagnosis: the label of a diagnosis answer ("premature ventricular contraction").
        span: see :data:`SPANS`.
        aux_note: WFDB rhythm aux note without ``(`` (``"AFIB"``), or None.
        detected: :func:`ecgtrace.tools.rhythm.detect_events` emits it.
        qa: QA templates may target it.
    """

    name: str
    singular: str
    plural: str
    diagnosis: str
    span: Span
    aux_note: str | None = None
    detected: bool = True
    qa: bool = True


_KINDS: tuple[EventKind, ...] = (
    EventKind("af", "atrial fibrillation", "episodes of atrial fibrillation", "atrial fibrillation", "episode", "AFIB"),
    EventKind("vt", "run of ventricular tachycardia", "runs of ventricular tachycardia", "ventricular tachycardia", "run", "VT"),
    EventKind("ivr", "idioventricular rhythm", "episodes of idioventricular rhythm", "idioventricular rhythm", "run", "IVR", qa=False),
    EventKind("svt", "run of supraventricular tachycardia", "runs of supraventricular tachycardia", "supraventricular tachycardia", "run", "SVTA"),
    EventKind("s_run", "atrial run", "atrial runs", "atrial run", "run", qa=False),
    EventKind("v_couplet", "ventricular couplet", "ventricular couplets", "ventricular couplet", "run"),
    EventKind("s_couplet", "atrial couplet", "atrial couplets", "atrial couplet", "run", qa=False),
    EventKind("v_bigeminy", "ventricular bigeminy", "episodes of ventricular bigeminy", "ventricular bigeminy", "pattern", "B"),
    EventKind("v_trigeminy", "ventricular trigeminy", "episodes of ventricular trigeminy", "ventricular trigeminy", "pattern", "T"),
    # atrial bigeminy is "(AB" as in LTAFDB; no standard PhysioNet note exists for atrial trigeminy
    EventKind("s_bigeminy", "atrial bigeminy", "episodes of atrial bigeminy", "atrial bigeminy", "pattern", "AB", qa=False),
    EventKind("s_trigeminy", "atrial trigeminy", "episodes of atrial trigeminy", "atrial trigeminy", "pattern", "STRI", qa=False),
    EventKind("pvc", "premature ventricular contraction (PVC)", "premature ventricular contractions (PVCs)", "premature ventricular contraction", "beat"),
    EventKind("pac", "premature atrial contraction (PAC)", "premature atrial contractions (PACs)", "premature atrial contraction", "beat"),
    EventKind("pause", "pause", "pauses", "sinus pause", "run"),
    # first-degree AV block comes from reference rhythm notes and the synthetic schedule, not from the beat stream
    EventKind("avb1", "first-degree AV block", "episodes of first-degree AV block", "first-degree AV block", "episode", "BI", detected=False),
    EventKind("sinus_tachycardia", "sinus tachycardia", "episodes of sinus tachycardia", "sinus tachycardia", "episode", "STACH"),
    EventKind("sinus_bradycardia", "sinus bradycardia", "episodes of sinus bradycardia", "sinus bradycardia", "episode", "SBR"),
    EventKind("noise", "noise", "noise spans", "noise", "run", qa=False),
)

#: Every event kind by name.
KINDS: dict[str, EventKind] = {k.name: k for k in _KINDS}

#: Every kind :func:`ecgtrace.tools.rhythm.detect_events` can emit, in its order.
EVENT_KINDS: tuple[str, ...] = tuple(k.name for k in _KINDS if k.detected)

#: Kinds a QA template may target, in template order (the synthetic schedule's vocabulary, noise excluded).
QA_EVENT_KINDS: tuple[str, ...] = (
    "pac", "pvc", "v_couplet", "vt", "svt", "v_bigeminy", "v_trigeminy",
    "af", "pause", "avb1", "sinus_tachycardia", "sinus_bradycardia",
)

#: Kinds whose episodes last minutes: a QA window is placed inside the episode.
EPISODE_KINDS: frozenset[str] = frozenset(k.name for k in _KINDS if k.span == "episode")

#: QA target kinds an event of which may cover a whole window (episodes and repeating patterns): a window
#: may lie inside one; any other event must lie wholly inside a window or away from it.
COVERING_KINDS: frozenset[str] = frozenset(k.name for k in _KINDS if k.span in ("episode", "pattern") and k.qa)

#: ``{kind: aux note}`` for kinds marked by a WFDB rhythm aux note (``"(AFIB"`` is written as ``"(" + note``).
RHYTHM_NOTES: dict[str, str] = {k.name: k.aux_note for k in _KINDS if k.aux_note}

#: The finding of a window with no event: the answer of a "normal" diagnosis item.
NORMAL = "normal"
NORMAL_LABELS: tuple[str, str] = ("normal sinus rhythm", "normal sinus rhythm")
NORMAL_DIAGNOSIS = "normal sinus rhythm"


def kind_of_note(note: str) -> str | None:
    """The event kind a rhythm aux note marks (``"AFIB"`` -> ``"af"``), or None."""
    for name, aux in RHYTHM_NOTES.items():
        if aux == note:
            return name
    return None


# ----------------------------------------------------------------------- modalities

#: Files a dataset builder can render for an item.
ASSET_MODALITIES: tuple[str, ...] = ("text", "image", "video")
#: How an examination shows the ECG to the model under test.
EXAM_MODALITIES: tuple[str, ...] = ("image", "text", "both")


def assets_needed(modality: str) -> tuple[str, ...]:
    """The asset kinds an examination modality shows (``both`` -> text and image)."""
    return ("text", "image") if modality == "both" else (modality,)


# ----------------------------------------------------------------------- examination

#: Turn stages of a reasoning-audit chain, in asking order.
AUDIT_STAGES: tuple[str, ...] = ("initial", "criterion", "finding", "grounding", "decision")
#: Kinds of grounding question.
GROUNDING_KINDS: tuple[str, ...] = ("lead", "wave", "measurement")
#: Conversation modes: teacher forcing (ERB) or stop at the first error (CXReasonBench).
EXAM_MODES: tuple[str, ...] = ("teacher", "stop")
#: What a run examines.
RUN_KINDS: tuple[str, ...] = ("audit", "qa")
