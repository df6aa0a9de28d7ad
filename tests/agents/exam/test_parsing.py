"""Tolerant answer parsing: letters, text, bold, JSON, lists; failures carry a reason, never raise."""

from __future__ import annotations

import pytest

from ecgtrace.agents.exam.parsing import is_correct, parse_answer

YN = ["Yes", "No"]
DECISION = ["Yes", "No", "Further findings are required to confirm the diagnosis"]
LEADS = ["I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6"]
WAVES = ["[5.62s - 5.81s]", "[6.00s - 6.20s]", "[7.10s - 7.31s]"]
BINS = ["[180-190] ms", "[200-210] ms", "[210-220] ms"]
CRITERIA = ["Irregularly irregular RR intervals", "PR interval > 200 ms", "QRS duration > 120 ms",
            "ST elevation > 0.1 mV", "Heart rate < 60 bpm"]


@pytest.mark.parametrize(("text", "options", "expected"), [
    ("B", YN, "No"),
    ("b", YN, "No"),
    ("(B)", YN, "No"),
    ("B.", YN, "No"),
    ("B) No", YN, "No"),
    ("B. No", YN, "No"),
    ("Answer: B", YN, "No"),
    ("Final answer: (A)", YN, "Yes"),
    ("The answer is B", YN, "No"),
    ("No.", YN, "No"),
    ("yes", YN, "Yes"),
    ("**No**", YN, "No"),
    ("Looking at the rhythm strip... so **B. No**", YN, "No"),
    ('{"answer": "A"}', YN, "Yes"),
    ('Here you go: {"answer": "No", "confidence": 0.7}', YN, "No"),
    ("<think>It could be A</think>\nAnswer: B", YN, "No"),
    ("A normal ECG would say no", YN, "No"),
    ("C", DECISION, DECISION[2]),
    ("Further findings are required.", DECISION, DECISION[2]),
    ("No", DECISION, "No"),
    ("D", CRITERIA, "ST elevation > 0.1 mV"),
    ("Option E: Heart rate < 60 bpm", CRITERIA, "Heart rate < 60 bpm"),
    ("PR interval > 200 ms", CRITERIA, "PR interval > 200 ms"),
    ("A", WAVES, "[5.62s - 5.81s]"),
    ("[6.00s - 6.20s]", WAVES, "[6.00s - 6.20s]"),
    ("The interval is [7.10s - 7.31s].", WAVES, "[7.10s - 7.31s]"),
    ("[200-210] ms", BINS, "[200-210] ms"),
    ("**[210-220] ms**", BINS, "[210-220] ms"),
])
def test_single_answers(text, options, expected):
    result = parse_answer(text, options)
    assert result.ok, result.reason
    assert result.value == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("A, C", ["I", "III"]),
    ("A,C", ["I", "III"]),
    ('["I", "V1"]', ["I", "V1"]),
    ('{"answer": ["II", "aVF"]}', ["II", "aVF"]),
    ("I and V1", ["I", "V1"]),
    ("V1; V2", ["V1", "V2"]),
    ("I", ["I"]),                       # lead I by text, not the ninth option
    ("Leads II, III and aVF", ["II", "III", "aVF"]),  # II is not swallowed by III
    ("Answer: G, H", ["V1", "V2"]),
])
def test_multi_select(text, expected):
    result = parse_answer(text, LEADS, multi=True)
    assert result.ok, result.reason
    assert result.value == expected


@pytest.mark.parametrize(("text", "reason"), [
    (None, "no reply"),
    ("", "empty reply"),
    ("   ", "empty reply"),
    (42, "not text"),
    ("zebra quartz lorem", "no option recognised"),
    ("Yes and No", "no option recognised"),
    ("A. No", "contradicts"),
    ("<think>unfinished", "no option recognised"),
])
def test_failures_have_a_reason(text, reason):
    result = parse_answer(text, YN)
    assert not result.ok and result.value is None
    assert reason in result.reason


def test_never_raises_on_odd_text():
    for text in ["{", "[[[", '{"answer": {"nested": 1}}', "**", "\x00\x01", "A" * 10000, "{}" * 500, '["Z"]']:
        result = parse_answer(text, LEADS, multi=True)
        assert isinstance(result.ok, bool)


def test_exact_set_scoring():
    assert is_correct(["I", "V1"], ["V1", "I"], multi=True)
    assert not is_correct(["I"], ["V1", "I"], multi=True)
    assert not is_correct(["I", "V1", "V2"], ["V1", "I"], multi=True)
    assert is_correct("No", "No") and not is_correct(None, "No")


def test_option_text_with_an_asterisk_is_kept():
    from ecgtrace.agents.exam.parsing import parse_answer

    options = ["Cornell product > 0.244 mV*s", "Sokolow-Lyon > 3.5 mV", "QRS > 120 ms", "PR > 200 ms", "RR irregular"]
    for raw in ("Cornell product > 0.244 mV*s", "A. Cornell product > 0.244 mV*s", "**Cornell product > 0.244 mV*s**"):
        result = parse_answer(raw, options)
        assert result.ok and result.value == options[0], (raw, result)
