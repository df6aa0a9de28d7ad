"""One way to show an item to an examinee: option prompts, asset files and OpenAI chat messages.

Used by the reasoning audit (every turn of a conversation), the QA runner (one
request per item), the debugger's re-ask, the report, and the dataset writer,
which stores ready-made messages in ``qa.jsonl``.

* :func:`option_lines` is the one formatter of lettered options (``A. Yes``);
  :func:`closed_prompt`, :func:`question_prompt` and :func:`dataset_prompt`
  lay a question out around it (ERB's layout and the audit's prompt styles
  are in :mod:`ecgtrace.agents.exam.prompt_styles`).
* :func:`resolve_asset` is the one way an asset path becomes a file: relative to
  the dataset folder, and refused when the resolved path leaves it.
* :func:`check_modality` refuses, before any model call, an item that cannot be
  shown in a modality (``image``, ``text``, ``both``).
* :func:`build_messages` turns an item (audit or QA) plus its assets into chat
  messages for a modality (a QA item's own stored messages win:
  :mod:`ecgtrace.agents.exam.own_messages`); :func:`request_messages` is its core, for callers
  that hold file paths rather than an item (the dataset writer).
* The ECG as text is written in the run's text encoding
  (:class:`ecgtrace.tools.text_encodings.TextEncoding`: raw samples, downsampled,
  compact integers or a measured summary), re-encoded from the item's raw text
  asset (:func:`signal_text`), so the text shows the very window the image shows.

How a request is laid out differs between the three callers; those differences
are data (:class:`Layout`, the three instances below side by side), kept so that
prompts and datasets stay byte-identical to what earlier versions sent and
wrote. The ECG itself (image bytes, text) is read from disk on demand and
cached by path, size and modification time; it never enters graph state.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecgtrace.agents.exam import parsing
from ecgtrace.agents.exam.asset_files import asset_text, image_data_uri, resolve_asset, shown_files, signal_text
from ecgtrace.agents.exam.own_messages import own_messages
from ecgtrace.contracts.audit import AuditItem
from ecgtrace.contracts.datasets import DATASET_KINDS, kind_of_item
from ecgtrace.contracts.qa import QAItem
from ecgtrace.contracts.vocabulary import EXAM_MODALITIES, assets_needed
from ecgtrace.errors import DatasetFormatError, EcgTraceError
from ecgtrace.tools.text_encodings import RAW, TextEncoding

LETTERS = parsing.LETTERS  # the letters the parser reads back
SINGLE_HINT = "Answer with the letter of one option."
MULTI_HINT = "Select every option that applies. Answer with the letters separated by commas, e.g. 'A, C'."
#: How to answer an open question, by ``answer_type``.
OPEN_HINTS: dict[str, str] = {
    "integer": "Answer with a single number.",
    "time_ms": "Answer with one time in ms from the recording start.",
    "timestamps_ms": "Answer with every time in ms from the recording start, separated by commas, or 'none'.",
    "label": "Answer with the name of the finding.",
}
#: What samples.jsonl keeps of a QA request (the ECG as text can be tens of kB).
PROMPT_KEEP_CHARS = 4000

ExamItem = AuditItem | QAItem


def text_only_as_string(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Content parts that are all text as one string (joined by a blank line); content with an image stays a list."""
    if all(isinstance(p, dict) and p.get("type") == "text" for p in parts):
        return "\n\n".join(str(p.get("text", "")) for p in parts)
    return parts
#: Re-exported: the asset resolver and readers live in :mod:`ecgtrace.agents.exam.asset_files`.
__all__ = ["AUDIT", "DATASET", "QA", "Layout", "asset_text", "build_messages", "check_modality", "closed_prompt", "dataset_messages",
           "dataset_prompt", "ecg_content", "ecg_intro", "ecg_parts", "exam_item", "image_data_uri", "lettered_answer", "option_lines",
           "own_messages", "prompt_record", "question_prompt", "request_messages", "resolve_asset", "shown_files", "signal_text"]


# ------------------------------------------------------------------ prompts

def option_lines(options: list[str]) -> list[str]:
    """``["A. Yes", "B. No"]``: the options as they are shown, lettered in order."""
    return [f"{LETTERS[i]}. {option}" for i, option in enumerate(options)]


def closed_prompt(question: str, options: list[str], multi: bool = False) -> str:
    """A closed question as the examination asks it: question, lettered options, how to answer."""
    return "\n".join([question, "", *option_lines(options), "", MULTI_HINT if multi else SINGLE_HINT])


def question_prompt(question: str, options: list[str] | None, *, multi: bool = False, answer_type: str | None = None) -> str:
    """A closed question (:func:`closed_prompt`), or an open one with the hint for its ``answer_type``."""
    if options:
        return closed_prompt(question, options, multi)
    hint = OPEN_HINTS.get(str(answer_type))
    return f"{question}\n\n{hint}" if hint else question


def dataset_prompt(question: str, options: list[str] | None) -> str:
    """A question as the dataset stores it in an item's own messages (options answered by their text)."""
    lines = [question]
    if options:
        lines += ["Options:", *option_lines(options), "Answer with the text of one option."]
    return "\n".join(lines)


def lettered_answer(options: list[str], answer: str | list[str]) -> str:
    """The answer as the assistant would have said it (``"A. MLII, C. V5"``): teacher forcing."""
    answers = answer if isinstance(answer, list) else [answer]
    return ", ".join(f"{LETTERS[options.index(a)]}. {a}" for a in answers)



# ------------------------------------------------------------------ items and assets

def exam_item(item: ExamItem | dict[str, Any]) -> ExamItem:
    """An audit or QA item as its contract; plain JSON is validated as the kind its structure declares."""
    if isinstance(item, AuditItem | QAItem):
        return item
    model = DATASET_KINDS[kind_of_item(item)][1]
    return model.model_validate(item)  # type: ignore[return-value]


def _error(item: ExamItem) -> type[DatasetFormatError]:
    return DATASET_KINDS["audit" if isinstance(item, AuditItem) else "qa"][2]


def check_modality(item: ExamItem | dict[str, Any], base_dir: str | Path, modality: str) -> None:
    """Refuse, before any model call, an item that cannot be shown in ``modality``.

    An item's own ``messages`` (QA) decide; otherwise every asset the modality
    needs must be named and exist inside the dataset folder.
    """
    it = exam_item(item)
    error = _error(it)
    if modality not in EXAM_MODALITIES:
        raise error(f"unknown modality {modality!r} (choose from {', '.join(EXAM_MODALITIES)})")
    prebuilt = it.messages if isinstance(it, QAItem) else None
    if isinstance(prebuilt, list) and prebuilt:
        _check_message_files(it, base_dir, prebuilt, error)
        return
    if isinstance(prebuilt, dict):
        for name in assets_needed(modality):
            if not prebuilt.get(name):
                raise error(f"item {it.id!r} has no messages.{name}, needed for --modality {modality}")
        _check_message_files(it, base_dir, [m for name in assets_needed(modality) for m in prebuilt[name]], error)
        return
    field, files = shown_files(it)
    for name in assets_needed(modality):
        if not files.get(name):  # audit items have no video
            raise error(f"item {it.id!r} has no {field}.{name}, needed for --modality {modality}")
        for rel in files[name]:
            if not resolve_asset(base_dir, rel, error).is_file():
                raise error(f"item {it.id!r}: {field}.{name} file not found: {Path(base_dir) / rel}")


def _check_message_files(item: QAItem, base_dir: str | Path, messages: list[Any], error: type[DatasetFormatError]) -> None:
    """The files an item's own messages will read (image paths, its text assets) resolve inside the dataset folder."""
    paths = [url for message in messages if isinstance(message, dict) and isinstance(message.get("content"), list)
             for part in message["content"] if isinstance(part, dict) and part.get("type") == "image_url"
             for url in [(part.get("image_url") or {}).get("url")]
             if isinstance(url, str) and not url.startswith(("data:", "http://", "https://"))]
    for rel in [*paths, *shown_files(item)[1]["text"]]:
        resolve_asset(base_dir, rel, error)


def ecg_intro(record: Any, window: Any) -> str:
    """``ECG record 100 from 5 s to 15 s, leads MLII, V1, sampled at 360 Hz.``"""
    rec = record.to_json() if hasattr(record, "to_json") else (record or {})
    win = window.model_dump() if hasattr(window, "model_dump") else window
    where = f" from {win['t0_s']:g} s to {win['t1_s']:g} s" if win else ""
    return f"ECG record {rec.get('id', '?')}{where}, leads {', '.join(rec.get('leads') or [])}, sampled at {rec.get('fs_hz', 0):g} Hz."


# ------------------------------------------------------------------ messages

@dataclass(frozen=True)
class Layout:
    """How one kind of request shows the ECG and the question.

    Attributes:
        system_prompt: the system message (None: no system message).
        intro: start with :func:`ecg_intro` (which record, window, leads, rate).
        signal_label: the line above the signal as text.
        signal_joins: separator that appends the (first) signal text to the text before it
            (the intro, or the prompt when ``prompt_first``) instead of a part of its own; None keeps it apart.
        prompt_first: the question comes before the ECG (stored datasets) instead of after it.
        inline_images: images as data URIs (sent now) or as their relative paths (stored, inlined when sent).
        text_as_string: a first message that is all text becomes one string (content parts cost the SDK ~3x more CPU).
        paper_note: when images are shown, the system prompt also says what the ECG paper's squares mean
            (:data:`ecgtrace.tools.render.PAPER_NOTE`: a large square is 0.2 s x 0.5 mV).
    """

    system_prompt: str | None
    intro: bool = True
    signal_label: str = "Signal as text:"
    signal_joins: str | None = None
    prompt_first: bool = False
    inline_images: bool = True
    text_as_string: bool = False
    paper_note: bool = False


#: The reasoning audit: a conversation; the ECG rides on the first user message.
AUDIT = Layout(
    system_prompt=("You are a cardiologist reading an electrocardiogram (ECG). You will be asked a series of "
                   "multiple-choice questions about the ECG shown in the first message. Answer each question with "
                   "the letter of your choice followed by the option text, for example 'B. No'."),
    signal_joins="\n", text_as_string=True, paper_note=True)
#: QA items without messages of their own: one request per item.
QA = Layout(system_prompt=("You are a cardiologist reading a Holter electrocardiogram (ECG). Answer the question about the ECG "
                           "shown in this message. Times are in milliseconds from the recording start unless stated otherwise."))
#: The messages a dataset stores in its items (``qa.jsonl``), one list per modality.
DATASET = Layout(system_prompt=None, intro=False, signal_label="ECG signal (text):", signal_joins="\n\n", prompt_first=True,
                 inline_images=False)


def ecg_parts(layout: Layout, base_dir: str | Path, modality: str, *, texts: list[str], images: list[str], intro: str | None,
              lead: str | None = None, encoding: TextEncoding = RAW) -> list[dict[str, Any]]:
    """OpenAI content parts that show the ECG in ``modality``.

    Args:
        texts, images: asset paths relative to ``base_dir`` (read only when ``modality`` shows them).
        intro: the ECG intro line (used when the layout has one).
        lead: text that comes before the ECG (the question, in ``prompt_first`` layouts).
        encoding: how the signal text is written (:func:`signal_text`).
    """
    signals = ([f"{layout.signal_label}\n{signal_text(resolve_asset(base_dir, rel), encoding)}" for rel in texts]
               if modality in ("text", "both") else [])
    head = [lead] if lead is not None else []
    if layout.intro and intro is not None:
        head.append(intro)
    if layout.signal_joins is not None and signals and head:
        head[-1] = f"{head[-1]}{layout.signal_joins}{signals.pop(0)}"
    parts: list[dict[str, Any]] = [{"type": "text", "text": text} for text in [*head, *signals]]
    for rel in images if modality in ("image", "both") else []:
        url = image_data_uri(resolve_asset(base_dir, rel)) if layout.inline_images else rel
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def request_messages(layout: Layout, base_dir: str | Path, modality: str, *, texts: list[str], images: list[str],
                     intro: str | None, prompt: str, history: list[dict[str, Any]] | tuple = (),
                     encoding: TextEncoding = RAW) -> list[dict[str, Any]]:
    """Chat messages: [system], the first user message (ECG + first question), the text history, this question.

    ``texts``, ``images`` and ``intro`` are as for :func:`ecg_parts`; ``prompt`` is
    this turn's question; ``history`` the plain-text conversation so far
    (``{"role", "content"}`` pairs); the ECG goes with its first message.
    """
    turns = [*history, {"role": "user", "content": prompt}]
    first = str(turns[0]["content"])
    parts = ecg_parts(layout, base_dir, modality, texts=texts, images=images, intro=intro, lead=first if layout.prompt_first else None,
                      encoding=encoding)
    if not layout.prompt_first:
        parts.append({"type": "text", "text": first})
    content: Any = text_only_as_string(parts) if layout.text_as_string else parts
    system = layout.system_prompt
    if system and layout.paper_note and images and modality in ("image", "both"):
        from ecgtrace.tools.render import PAPER_NOTE

        system = f"{system} {PAPER_NOTE}"
    messages = [{"role": "system", "content": system}] if system else []
    return [*messages, {"role": "user", "content": content}, *turns[1:]]


def ecg_content(item: ExamItem | dict[str, Any], base_dir: str | Path, modality: str, *, layout: Layout,
                encoding: TextEncoding = RAW) -> list[dict[str, Any]]:
    """The content parts that show ``item``'s ECG in ``layout`` (the first user message without its question)."""
    it = exam_item(item)
    _, files = shown_files(it)
    return ecg_parts(layout, base_dir, modality, texts=files["text"], images=files["image"], intro=ecg_intro(it.record, it.window),
                     encoding=encoding)


def build_messages(item: ExamItem | dict[str, Any], base_dir: str | Path, modality: str, *, layout: Layout, prompt: str,
                   history: list[dict[str, Any]] | tuple = (), encoding: TextEncoding = RAW) -> list[dict[str, Any]]:
    """OpenAI chat messages that show ``item`` in ``modality`` and ask ``prompt``.

    A QA item's own ``messages`` win (:func:`ecgtrace.agents.exam.own_messages.own_messages`); otherwise the
    request is built from the item's asset files in ``layout``. ``encoding``
    says how the signal text is written (raw: the asset as it is).
    """
    it = exam_item(item)
    if isinstance(it, QAItem):
        own = own_messages(it, base_dir, modality, encoding)
        if own is not None:
            return own
    _, files = shown_files(it)
    return request_messages(layout, base_dir, modality, texts=files["text"], images=files["image"],
                            intro=ecg_intro(it.record, it.window), prompt=prompt, history=history, encoding=encoding)


def dataset_messages(row: dict[str, Any], out_dir: str | Path, context_text: str | None = None) -> dict[str, Any]:
    """The messages a dataset stores in an item, per modality: ``{"text": [...], "image": [...]}`` (None where absent).

    Text messages hold the serialized signal inline; image messages hold
    ``image_url`` parts whose URL is the relative asset path (inlined when the
    item is asked). ``context_text`` (the per-hour summary of whole-record
    items) is appended to the image prompt; the text asset already holds it.
    """
    prompt = dataset_prompt(row["question"], row.get("options"))
    mods = row["modalities"]
    texts = [mods["text"]] if mods.get("text") else []
    images = list(mods.get("image") or [])
    image_prompt = f"{prompt}\n\n{context_text}" if context_text else prompt
    return {"text": request_messages(DATASET, out_dir, "text", texts=texts, images=[], intro=None, prompt=prompt) if texts else None,
            "image": request_messages(DATASET, out_dir, "image", texts=[], images=images, intro=None, prompt=image_prompt) if images else None}


def prompt_record(messages: list[dict[str, Any]]) -> str:
    """What samples.jsonl keeps of a request: the last user message's text (images as ``[image]``), capped.

    The ECG as text can be tens of kB per item; only its first characters are
    kept (the dataset holds the rest), so the run log stays small.
    """
    user = next((m for m in reversed(messages) if m.get("role") == "user"), {"content": ""})
    content = user.get("content")
    if isinstance(content, list):
        text = "\n".join(p.get("text", "") if p.get("type") == "text" else "[image]" for p in content if isinstance(p, dict))
    else:
        text = str(content or "")
    if len(text) > PROMPT_KEEP_CHARS:
        text = text[:PROMPT_KEEP_CHARS] + f"\n[... {len(text) - PROMPT_KEEP_CHARS} more characters of the request not stored]"
    return text
