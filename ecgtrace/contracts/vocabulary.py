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
    EventKind("s_couplet", "pair of premature atrial contractions (atrial couplet)", "pairs of premature atrial contractions (atrial couplets)", "paired premature atrial contractions", "run"),
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
    # Holtercare's rhythm vocabulary (tools/_rhythm_escape.py, tools/_rhythm_conduction.py, tools/_rhythm_waves.py;
    # the synthetic generator's profile="holtercare" schedules every one of them)
    EventKind("afl", "atrial flutter", "episodes of atrial flutter", "atrial flutter", "episode", "AFL"),
    EventKind("atrial_tachycardia", "atrial tachycardia", "episodes of atrial tachycardia", "atrial tachycardia", "episode", "AT"),
    EventKind("vfl", "ventricular flutter", "episodes of ventricular flutter", "ventricular flutter", "run", "VFL"),
    EventKind("vf", "ventricular fibrillation", "episodes of ventricular fibrillation", "ventricular fibrillation", "run", "VF"),
    EventKind("asystole", "asystole (pause over 3 s)", "asystoles (pauses over 3 s)", "asystole", "run"),
    EventKind("junctional_escape", "junctional escape beat", "junctional escape beats", "junctional escape beat", "beat"),
    EventKind("ventricular_escape", "ventricular escape beat", "ventricular escape beats", "ventricular escape beat", "beat"),
    EventKind("junctional_rhythm", "junctional escape rhythm", "episodes of junctional escape rhythm", "junctional escape rhythm", "run", "NOD"),
    # a slow idioventricular rhythm: annotation files mark it "(IVR" like ivr
    EventKind("ventricular_escape_rhythm", "ventricular escape rhythm", "episodes of ventricular escape rhythm", "ventricular escape rhythm", "run"),
    # "(BII" marks second-degree AV block of any type in PhysioNet files; the three types are told apart from P waves
    EventKind("avb2", "second-degree AV block", "episodes of second-degree AV block", "second-degree AV block", "run", "BII", detected=False, qa=False),
    EventKind("avb2_mobitz1", "second-degree AV block, Mobitz I (Wenckebach)", "episodes of second-degree AV block, Mobitz I",
              "second-degree AV block Mobitz I", "run"),
    EventKind("avb2_mobitz2", "second-degree AV block, Mobitz II", "episodes of second-degree AV block, Mobitz II",
              "second-degree AV block Mobitz II", "run"),
    EventKind("avb_2to1", "2:1 AV block", "episodes of 2:1 AV block", "2:1 AV block", "run"),
    EventKind("avb3", "third-degree AV block", "episodes of third-degree AV block", "third-degree AV block", "run", "BIII"),
    EventKind("blocked_pac", "non-conducted premature atrial contraction", "non-conducted premature atrial contractions",
              "non-conducted premature atrial contraction", "beat"),
)

#: Every event kind by name.
KINDS: dict[str, EventKind] = {k.name: k for k in _KINDS}

#: Every kind :func:`ecgtrace.tools.rhythm.detect_events` can emit, in its order.
EVENT_KINDS: tuple[str, ...] = tuple(k.name for k in _KINDS if k.detected)

#: Kinds a QA template may target, in template order (the synthetic schedule's vocabulary, noise excluded).
QA_EVENT_KINDS: tuple[str, ...] = (
    "pac", "pvc", "v_couplet", "vt", "svt", "v_bigeminy", "v_trigeminy",
    "af", "pause", "avb1", "sinus_tachycardia", "sinus_bradycardia",
    # Holtercare's rhythm vocabulary, after the original kinds so that templates keep their order
    "s_couplet", "afl", "atrial_tachycardia", "vfl", "vf", "asystole", "junctional_escape", "ventricular_escape",
    "junctional_rhythm", "ventricular_escape_rhythm", "avb2_mobitz1", "avb2_mobitz2", "avb_2to1", "avb3", "blocked_pac",
)
#: Kinds a count or timing question may target: discrete events (beats, runs), never minutes-long episodes.
COUNTABLE_KINDS: tuple[str, ...] = tuple(k for k in QA_EVENT_KINDS if KINDS[k].span in ("beat", "run"))

#: Kinds whose episodes last minutes: a QA window is placed inside the episode.
EPISODE_KINDS: frozenset[str] = frozenset(k.name for k in _KINDS if k.span == "episode")

#: QA target kinds an event of which may cover a whole window (episodes and repeating patterns): a window
#: may lie inside one; any other event must lie wholly inside a window or away from it.
COVERING_KINDS: frozenset[str] = frozenset(k.name for k in _KINDS if k.span in ("episode", "pattern") and k.qa)

#: ``{kind: aux note}`` for kinds marked by a WFDB rhythm aux note (``"(AFIB"`` is written as ``"(" + note``).
RHYTHM_NOTES: dict[str, str] = {k.name: k.aux_note for k in _KINDS if k.aux_note}
#: Kinds whose beats carry the note of a broader kind (a ventricular escape rhythm is an idioventricular rhythm).
NOTE_OF: dict[str, str] = {"ventricular_escape_rhythm": "ivr", "avb2_mobitz1": "avb2", "avb2_mobitz2": "avb2", "avb_2to1": "avb2"}


def note_for(kind: str) -> str | None:
    """The rhythm aux note written for ``kind`` (its own, or that of the broader kind in :data:`NOTE_OF`), or None."""
    return RHYTHM_NOTES.get(NOTE_OF.get(kind, kind))

#: What a QA build keeps of the items on a record annotated by the detectors (ecgtrace.agents.holter.verifier):
#: ``validated`` drops an item that asserts an event kind not validated from the signal; ``all`` keeps it.
DETECTED_KINDS: tuple[str, ...] = ("validated", "all")

#: The finding of a window with no event: the answer of a "normal" diagnosis item.
NORMAL = "normal"
NORMAL_LABELS: tuple[str, str] = ("normal sinus rhythm", "normal sinus rhythm")
NORMAL_DIAGNOSIS = "normal sinus rhythm"


#: Other spellings of rhythm notes in PhysioNet databases (VFDB writes ``(VFIB`` beside ``(VF``).
NOTE_ALIASES: dict[str, str] = {"VFIB": "VF"}


def kind_of_note(note: str) -> str | None:
    """The event kind a rhythm aux note marks (``"AFIB"`` -> ``"af"``), or None (shared notes: the first kind listed)."""
    note = NOTE_ALIASES.get(note, note)
    for name, aux in RHYTHM_NOTES.items():
        if aux == note:
            return name
    return None


# ----------------------------------------------------------------------- modalities

#: Files a dataset builder can render for an item.
ASSET_MODALITIES: tuple[str, ...] = ("text", "image", "video")
#: How an examination shows the ECG to the model under test (``video``: QA items' MP4, as frames or as the video).
EXAM_MODALITIES: tuple[str, ...] = ("image", "text", "both", "video")
#: How the ECG is written as text for an examination (:mod:`ecgtrace.tools.text_encodings`).
TEXT_ENCODINGS: tuple[str, ...] = ("raw", "compact", "downsampled", "summary")


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
#: What a run examines (``probe``: originals and their counterfactuals, run header format 3).
RUN_KINDS: tuple[str, ...] = ("audit", "qa", "probe")
#: Counterfactual probes: the evidence taken out, moved, the same question asked of an opposite window,
#: and a control edit that changes nothing a reader should see (:mod:`ecgtrace.tools.counterfactual`).
COUNTERFACTUAL_KINDS: tuple[str, ...] = ("remove", "move", "swap", "control")


# ----------------------------------------------------------------------- leads

#: The 12 standard leads in the order a 12-lead ECG is shown (ERB's order): limb leads, augmented, precordial.
TWELVE_LEADS: tuple[str, ...] = ("I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6")
_LEAD_BY_UPPER: dict[str, str] = {lead.upper(): lead for lead in TWELVE_LEADS}


def standard_lead_name(name: str) -> str:
    """A lead name in its standard spelling (``"AVR"`` -> ``"aVR"``, ``"v1"`` -> ``"V1"``); other names unchanged."""
    return _LEAD_BY_UPPER.get(name.strip().upper(), name.strip())


def lead_of_option(option: str) -> str:
    """The lead a lead-grounding option names: ERB's ``"Lead V1"`` and ecgtrace's ``"V1"`` both give ``"V1"``."""
    text = option.strip()
    if text[:5].lower() == "lead ":
        text = text[5:]
    return standard_lead_name(text)
