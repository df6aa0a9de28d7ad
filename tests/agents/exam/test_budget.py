"""Counting a request before it is sent: text, images, the server's usage, and where the budget comes from."""

from __future__ import annotations

import base64
from pathlib import Path

from ecgtrace.agents.exam.budget import (ANSWER_RESERVE_TOKENS, MESSAGE_OVERHEAD_TOKENS, REQUEST_OVERHEAD_TOKENS, UNKNOWN_IMAGE_TOKENS,
                                         estimate_request_tokens, image_tokens, next_request_tokens, png_size, prompt_budget)
from ecgtrace.tools.tokens import estimate_tokens

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_png_size_is_read_from_the_header() -> None:
    import matplotlib.image

    png = (FIXTURES / "qa_assets" / "w120.png").read_bytes()
    height, width = matplotlib.image.imread(FIXTURES / "qa_assets" / "w120.png").shape[:2]
    assert png_size("data:image/png;base64," + base64.b64encode(png).decode()) == (width, height)
    assert png_size("data:image/jpeg;base64,AAAA") is None and png_size("assets/x.png") is None


def test_image_tokens_take_the_larger_of_two_accountings() -> None:
    # 1024 x 1024: OpenAI high detail -> 768 x 768 -> 4 tiles -> 85 + 680 = 765; 28 px patches: 37 x 37 + 2 = 1371
    assert image_tokens(1024, 1024) == 1371
    # 4096 x 512: fit in 2048 -> 2048 x 256 (shortest side under 768) -> 4 x 1 tiles -> 765; patches 147 x 19 + 2 = 2795
    assert image_tokens(4096, 512) == 2795
    assert image_tokens(20_000, 20_000) == 16_384 + 2  # patches are capped


def test_a_request_is_its_parts_plus_the_template() -> None:
    text = "Is there a PVC?\n\nA. Yes\nB. No"
    messages = [{"role": "system", "content": "You read ECGs."},
                {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}}]}]
    expected = REQUEST_OVERHEAD_TOKENS + 2 * MESSAGE_OVERHEAD_TOKENS + estimate_tokens("You read ECGs.") + estimate_tokens(text) + UNKNOWN_IMAGE_TOKENS
    assert estimate_request_tokens(messages) == expected


def test_the_servers_usage_replaces_the_estimate_of_what_it_covered() -> None:
    first = [{"role": "user", "content": "x" * 3000}]
    later = [*first, {"role": "assistant", "content": "A. Yes"}, {"role": "user", "content": "Next?"}]
    added = 2 * MESSAGE_OVERHEAD_TOKENS + estimate_tokens("A. Yes") + estimate_tokens("Next?")
    assert next_request_tokens(later, {"prompt_tokens": 777}, len(first)) == 777 + added
    assert next_request_tokens(later, None, len(first)) == estimate_request_tokens(later)
    assert next_request_tokens(later, {"prompt_tokens": "n/a"}, len(first)) == estimate_request_tokens(later)


def test_where_the_budget_comes_from() -> None:
    assert prompt_budget(None) is None
    given = prompt_budget(4000, context_tokens=8192)
    assert given.max_prompt_tokens == 4000 and given.source == "--max-prompt-tokens"
    server = prompt_budget(None, context_tokens=8192)
    assert server.max_prompt_tokens == 8192 - ANSWER_RESERVE_TOKENS and "server context 8,192" in server.source
    assert prompt_budget(None, context_tokens=8192, max_tokens=100).max_prompt_tokens == 8092
    assert server.fits(8192 - ANSWER_RESERVE_TOKENS) and not server.fits(8192 - ANSWER_RESERVE_TOKENS + 1)
