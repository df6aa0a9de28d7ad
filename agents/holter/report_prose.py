"""Holter reports in prose, worded as Holtercare-Bench words them: the general summary and the statistical overview.

Each sentence has several phrasings (:data:`PHRASINGS`); an item's are drawn
from its seeded generator, so wording varies between items without an LLM.
Durations read "22 hours 39 minutes", totals carry thousands separators
("138,156 heartbeats"), heart rates come in several phrasings ("The maximum
recorded heart rate was 135 bpm", "The fastest recorded rate was 191 bpm").

Every phrasing reads back through
:func:`ecgtrace.agents.exam.report_stats.extract_statistics` to the numbers it
states; a prose item's truth is read that way, so the tests check every
phrasing against :func:`ecgtrace.agents.holter.report.report_statistics`.
"""

from __future__ import annotations

import random
from typing import Any

#: ``{sentence: [phrasing, ...]}``; fields in braces come from :func:`prose_values`.
PHRASINGS: dict[str, list[str]] = {
    "duration": ["The recording lasted {duration} and contains {total_beats} heartbeats.",
                 "Total recording time was {duration}, with {total_beats} heartbeats analysed.",
                 "{duration} of recording were analysed, {total_beats} heartbeats in total."],
    "rhythm": ["The underlying rhythm is {rhythm}.", "Rhythm: {rhythm}."],
    "mean_hr": ["The mean heart rate was {mean_hr_bpm} bpm.", "The average heart rate was {mean_hr_bpm} bpm.", "Mean HR {mean_hr_bpm} bpm."],
    "max_hr": ["The maximum recorded heart rate was {max_hr_bpm} bpm{max_hr_at}.",
               "The fastest recorded rate was {max_hr_bpm} bpm{max_hr_reached}.",
               "Maximum HR {max_hr_bpm} bpm{max_hr_at}."],
    "min_hr": ["The minimum recorded heart rate was {min_hr_bpm} bpm{min_hr_at}.",
               "The slowest recorded rate was {min_hr_bpm} bpm{min_hr_reached}.",
               "Minimum HR {min_hr_bpm} bpm{min_hr_at}."],
    "hr_burden": ["{pct_time_hr_gt_100}% of the time was spent above 100 bpm and {pct_time_hr_lt_60}% below 60 bpm.",
                  "Heart rate exceeded 100 bpm for {pct_time_hr_gt_100}% of the time and was under 60 bpm for {pct_time_hr_lt_60}% of the time."],
    "pac": ["Supraventricular ectopy: {pac_total} PACs ({pac_pct}% of all beats).",
            "There were {pac_total} premature atrial contractions ({pac_pct}% of all beats)."],
    "pac_breakdown": ["PAC breakdown: {pac_single} single, {pac_pairs} paired, {pac_runs} in runs, {pac_bigeminy} bigeminy "
                      "and {pac_trigeminy} trigeminy episodes, with {pac_nonconducted} non-conducted PACs."],
    "pvc": ["Ventricular ectopy: {pvc_total} PVCs ({pvc_pct}% of all beats).",
            "There were {pvc_total} premature ventricular contractions ({pvc_pct}% of all beats)."],
    "pvc_breakdown": ["PVC breakdown: {pvc_single} single, {couplets} paired, {pvc_runs} in runs, {bigeminy_episodes} bigeminy "
                      "and {trigeminy_episodes} trigeminy episodes."],
    "events": ["{couplets} ventricular couplets, {runs} runs (VT or SVT), {bigeminy_episodes} episodes of bigeminy, "
               "{trigeminy_episodes} of trigeminy and {pauses} pauses longer than 2 s.",
               "The recording shows {couplets} ventricular couplets, {runs} runs of VT or SVT, {bigeminy_episodes} episodes of bigeminy, "
               "{trigeminy_episodes} episodes of trigeminy and {pauses} pauses longer than 2 s."],
}
#: The sentences of each report, in order: both hold every statistic; the summary opens with the rhythm.
LAYOUTS: dict[str, tuple[str, ...]] = {
    "overview": ("duration", "rhythm", "mean_hr", "max_hr", "min_hr", "hr_burden", "pac", "pac_breakdown", "pvc", "pvc_breakdown", "events"),
    "summary": ("rhythm", "duration", "mean_hr", "max_hr", "min_hr", "hr_burden", "pac", "pac_breakdown", "pvc", "pvc_breakdown", "events"),
}


def duration_words(duration_s: float) -> str:
    """``81540`` -> ``"22 hours 39 minutes"``; under an hour ``"30 minutes"``; under a minute ``"45 seconds"`` (seconds rounded)."""
    total = int(round(duration_s))
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{hours} hour{'s' if hours != 1 else ''}"] if hours else []
    if minutes or (hours and not seconds):
        parts.append(f"{minutes} minute{'s' if minutes != 1 else ''}")
    if seconds and hours == 0:
        parts.append(f"{seconds} second{'s' if seconds != 1 else ''}")
    return " ".join(parts) or "0 seconds"


#: Totals written with thousands separators (times stay bare ms, as Holtercare writes them).
GROUPED_FIELDS = ("total_beats", "pac_total", "pvc_total")


def grouped(value: Any) -> str:
    """An integer with thousands separators (``138156`` -> ``"138,156"``); other values as they are."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def prose_values(stats: dict[str, Any]) -> dict[str, str]:
    """Every field a phrasing may use, as it is written (the time of an HR extremum only where it is known)."""
    values = {k: grouped(v) if k in GROUPED_FIELDS else str(v) for k, v in stats.items() if v is not None}
    if stats.get("duration_s") is not None:
        values["duration"] = duration_words(float(stats["duration_s"]))
    for kind in ("max", "min"):
        t = stats.get(f"{kind}_hr_t_ms")
        values[f"{kind}_hr_at"] = f" at {int(t)} ms" if t is not None else ""
        values[f"{kind}_hr_reached"] = f", reached at {int(t)} ms" if t is not None else ""
    return values


def choose(layout: str, rng: random.Random) -> dict[str, int]:
    """One phrasing index per sentence of ``layout``, drawn from ``rng``."""
    return {name: rng.randrange(len(PHRASINGS[name])) for name in LAYOUTS[layout]}


def report_prose(stats: dict[str, Any], layout: str, choice: dict[str, int]) -> str:
    """The report of ``layout`` (``summary`` or ``overview``) in the phrasings ``choice`` names (:func:`choose`).

    ``stats`` is :func:`ecgtrace.agents.holter.report.report_statistics`, or
    the part of it a report holds (the JSON overview has no breakdowns nor HR
    times): a sentence that needs a statistic ``stats`` lacks (an HR extremum
    without a valid RR, a breakdown) is left out.
    """
    values = prose_values(stats)
    sentences = []
    for name in LAYOUTS[layout]:
        phrasing = PHRASINGS[name][choice.get(name, 0) % len(PHRASINGS[name])]
        try:
            sentences.append(phrasing.format(**values))
        except KeyError:
            continue
    text = " ".join(sentences)
    return text[0].upper() + text[1:]


def summary_text(stats: dict[str, Any], rng: random.Random) -> str:
    """A general summary: rhythm, duration, heart rate, ectopy with the PAC/PVC breakdowns, runs and pauses."""
    return report_prose(stats, "summary", choose("summary", rng))


def overview_text(stats: dict[str, Any], rng: random.Random) -> str:
    """The statistical overview in prose: every statistic of :data:`ecgtrace.agents.holter.report.REPORT_FIELDS`."""
    return report_prose(stats, "overview", choose("overview", rng))
