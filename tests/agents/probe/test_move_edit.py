"""The move edit's timing rule: a non-compensatory ectopic beat may move when the two shifts cancel and no option straddles them.

Hand-made shifts and option spans; the expected answers are worked out by hand in each test.
"""

from __future__ import annotations

import pytest

from ecgtrace.agents.probe._audit_edits import Skip, shift_harm, slide_of
from ecgtrace.agents.probe._audit_item import moved_options


def test_a_move_without_shifts_harms_nothing() -> None:
    assert slide_of([]) is None and shift_harm([], [(1.0, 1.1)], (1.05, 5.0)) is None


def test_two_cancelling_shifts_slide_the_stretch_between_them() -> None:
    # 200 ms inserted at 10.5 s (where a PAC was), 200 ms taken out at 14.5 s (where it went): 10.5-14.5 s slides by +0.2 s
    shifts = [{"at_ms": 14_500, "by_ms": -200.0}, {"at_ms": 10_500, "by_ms": 200.0}]
    assert slide_of(shifts) == (10.5, 14.5, 0.2)
    options = [(10.30, 10.40), (12.00, 12.10), (14.20, 14.30)]  # the first holds the PAC, the last its new place
    assert shift_harm(shifts, options, (10.35, 14.25)) is None
    assert shift_harm(shifts, [*options, (10.45, 10.55)], (10.35, 14.25)) == "move_timing_shift_under_an_option"  # across 10.5 s


def test_shifts_that_do_not_cancel_are_refused() -> None:
    with pytest.raises(Skip, match="move_needs_a_timing_shift"):
        slide_of([{"at_ms": 10_500, "by_ms": 200.0}, {"at_ms": 14_500, "by_ms": -120.0}])
    assert shift_harm([{"at_ms": 10_500, "by_ms": 200.0}], [], (10.0, 14.0)) == "move_needs_a_timing_shift"


def test_moved_options_slide_the_spans_inside_the_stretch_and_redraw_the_two_places() -> None:
    options = ["[10.30s - 10.40s]", "[12.00s - 12.10s]", "[16.00s - 16.10s]"]
    redraw = {10.35: {"r_s": 10.30, "qrs_on_s": 10.26, "qrs_off_s": 10.34}}
    out = moved_options(options, [], redraw, slide=(10.5, 14.5, 0.2))
    assert out is not None
    assert "[12.20s - 12.30s]" in out  # inside the stretch: moved with its signal
    assert "[16.00s - 16.10s]" in out  # after the stretch: unchanged
    assert "[10.30s - 10.40s]" not in out  # the ectopic's old place: redrawn on the beat now there
