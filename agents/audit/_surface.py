"""Surface balance of audit questions: nothing about the answer may be read off the question text.

Two shortcuts are removed here without touching any ground truth:

* **criterion selection**: the correct criterion used to be the longest option
  (its thresholds make it wordy). The correct wording (the criterion ``text``
  or one of its ``variants``) and one wording of each of 4 distractors are
  chosen so that ``k`` - the number of options longer than the answer - takes
  every value 0..4 equally often over a set of items; no option is as long as
  the answer (no ties for a "longest option" rule to exploit). Among those
  wordings, two more text cues are kept at chance level per diagnosis: the
  answer sharing the most words with the question (it names the diagnosis),
  and the answer being the only option with (or without) numbers.
* **finding**: along a path most findings are present, so "Yes" dominated.
  A finding is asked either as a presence question (Yes = present) or as
  its exact complement from ``negated_questions`` (Yes = absent). Half of the
  loops of every (diagnosis, criterion, present) stratum get the negated
  wording, so Yes/No is balanced per diagnosis and the wording tells nothing
  about the answer.

:func:`balance_surface` re-assigns both over a whole set of items (a record's,
or the final dataset after merging), greedily keeping per-diagnosis and overall
counts level; randomness comes only from the ``rng`` passed in.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import zlib
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from ecgtrace.contracts.audit import YES_NO
from ecgtrace.rubrics.diagnosis_schema import Criterion, DiagnosisGraph, distractor_wordings

N_CRITERION_OPTIONS = 5
MAX_CHOICES = 50_000  # option sets enumerated per criterion at most (more wordings: sampled)
CUE_SLACK = 0.25  # wordings whose cue totals come within this (in questions) of the best are all drawn from
_STOP = frozenset("a an the of in on and or to with for at by is are be this that which following criteria criterion should be checked "
                  "check next diagnose diagnosis ecg does show".split())


def _pick(rng: np.random.Generator, variants: list[str]) -> str:
    return variants[int(rng.integers(len(variants)))]


def criterion_choices(crit: Criterion) -> dict[int, list[tuple[str, tuple[str, ...]]]]:
    """Every (answer wording, 4 distractor wordings) with no length tie, grouped by ``k`` (options longer than the answer).

    Graphs with very many wordings are sampled (:data:`MAX_CHOICES` draws,
    seeded by the criterion text) instead of enumerated.
    """
    entries = [distractor_wordings(e) for e in crit.distractors]
    answers = [crit.text, *crit.variants]
    usable = {a: [[w for w in ws if len(w) != len(a)] for ws in entries] for a in answers}
    combos = list(itertools.combinations(range(len(entries)), N_CRITERION_OPTIONS - 1))
    total = sum(math.prod(len(usable[a][i]) for i in combo) for a in answers for combo in combos)
    found: set[tuple[str, tuple[str, ...]]] = set()
    if total <= MAX_CHOICES:
        for answer in answers:
            for combo in combos:
                found.update((answer, words) for words in itertools.product(*(usable[answer][i] for i in combo)))
    else:
        rng = np.random.default_rng(zlib.crc32(crit.text.encode("utf-8")))
        for _ in range(MAX_CHOICES):
            answer = answers[int(rng.integers(len(answers)))]
            pools = [usable[answer][i] for i in combos[int(rng.integers(len(combos)))]]
            if all(pools):
                found.add((answer, tuple(pool[int(rng.integers(len(pool)))] for pool in pools)))
    out: dict[int, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    for answer, words in sorted(found):
        out[sum(1 for w in words if len(w) > len(answer))].append((answer, words))
    return dict(out)


@functools.lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP)


@functools.lru_cache(maxsize=65536)
def _shared(question: str, option: str) -> int:
    return len(_words(option) & _words(question))


@functools.lru_cache(maxsize=4096)
def _has_digit(text: str) -> bool:
    return re.search(r"[0-9]", text) is not None


def cue_deltas(question: str, options: list[str] | tuple[str, ...], answer: str) -> tuple[float, ...]:
    """How much each text cue points at ``answer`` beyond chance (0 when the cue says nothing).

    ``echo``: the answer is among the options sharing most words with the
    question; ``digits``: the answer is the only option with (or without)
    digits. Each value is ``hit - P(hit by chance)``; summed over questions it
    is the excess of a shortcut that follows the cue.
    """
    n = len(options)
    at = list(options).index(answer)
    shared = [_shared(question, o) for o in options]
    top = max(shared)
    echo = 0.0 if shared.count(top) == n else float(shared[at] == top) - shared.count(top) / n
    digits = [_has_digit(o) for o in options]
    odd = digits if sum(digits) == 1 else [not d for d in digits] if sum(digits) == n - 1 else None
    return (echo, 0.0 if odd is None else float(odd[at]) - 1.0 / n)


def criterion_question(graph: DiagnosisGraph, crit: Criterion, k: int | None, rng: np.random.Generator,
                       choices: dict[int, list[tuple[str, tuple[str, ...]]]] | None = None,
                       excess: list[list[float]] | None = None) -> tuple[dict[str, Any], int, tuple[float, ...]]:
    """The criterion-selection question with ``k`` options longer than the answer (nearest feasible ``k``; random when None).

    ``excess`` (levels, e.g. [this diagnosis, all items], each one running sum
    per cue of :func:`cue_deltas`): only wordings that bring the running sums
    nearest to zero (the first level weighs most) are drawn, so a cue that
    pointed at the answer more than chance so far is steered back. Returns the question, ``k``
    and the cue deltas of the drawn options.
    """
    choices = choices if choices is not None else criterion_choices(crit)
    feasible = sorted(choices)
    if k is None or k not in choices:
        target = int(rng.integers(N_CRITERION_OPTIONS)) if k is None else k
        best = min(abs(f - target) for f in feasible)
        near = [f for f in feasible if abs(f - target) == best]
        k = near[int(rng.integers(len(near)))]
    question = _pick(rng, graph.criterion_questions).replace("{name}", graph.name)
    pool = choices[k]
    keep = list(range(len(pool)))
    if excess:
        deltas = [cue_deltas(question, (answer, *words), answer) for answer, words in pool]
        for cue in range(len(excess[0])):  # keep the wordings that bring the running totals nearest to chance
            score = {i: sum(abs(level[cue] + deltas[i][cue]) * 0.5 ** depth for depth, level in enumerate(excess)) for i in keep}
            best = min(score.values())
            keep = [i for i in keep if score[i] <= best + CUE_SLACK]
    pick = keep[int(rng.integers(len(keep)))]
    answer, words = pool[pick]
    options = [answer, *words]
    options = [options[int(i)] for i in rng.permutation(len(options))]
    return {"question": question, "options": options, "answer": answer}, k, cue_deltas(question, options, answer)


#: ERB's question on an absent dropped beat: the pair around the longest RR.
LONGEST_PAIR_QUESTION = "Between which pair of consecutive QRS complexes is the RR interval the longest?"


def _lower_first(text: str) -> str:
    """``"What is ..."`` -> ``"what is ..."``; words that are acronyms or single letters (``"PR"``, ``"P wave"``) keep their case."""
    return text[0].lower() + text[1:] if len(text) > 1 and text[0].isupper() and text[1].islower() else text


def verify_wording(crit: Criterion, question: str) -> str:
    """A grounding question asked on an absent finding, as ERB asks it:
    ``To verify that this ECG does not show <criterion>, <question>``."""
    return f"To verify that this ECG does not show {_lower_first(crit.text)}, {_lower_first(question)}"


def finding_question(crit: Criterion, present: bool, negated: bool, rng: np.random.Generator) -> dict[str, Any]:
    """Yes/No finding question; ``negated`` asks the complement (Yes = finding absent)."""
    if negated and not crit.negated_questions:
        negated = False
    question = _pick(rng, crit.negated_questions if negated else crit.questions)
    yes = present != negated
    return {"question": question, "options": list(YES_NO), "answer": YES_NO[0] if yes else YES_NO[1]}


def _least(counts: list[Counter], candidates: list[Any], rng: np.random.Generator) -> Any:
    """The candidate with the smallest count in counts[0], ties broken by counts[1], ..., then at random."""
    order = [candidates[int(i)] for i in rng.permutation(len(candidates))]
    return min(order, key=lambda c: tuple(cnt[c] for cnt in counts))


def balance_surface(items: list[dict[str, Any]], graphs: dict[str, DiagnosisGraph], rng: np.random.Generator) -> None:
    """Rewrite every loop's criterion and finding question in place (see the module docstring).

    The loops of an item follow ``provenance.params.path.steps`` one to one;
    the answers' truth (which criterion, finding present or not) is unchanged.
    """
    slots = [(n, j) for n, item in enumerate(items) for j in range(len(item["loops"]))]
    slots = [slots[int(i)] for i in rng.permutation(len(slots))]
    cues_by_dx: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    cues_all = [0.0, 0.0]
    rank_by_dx: dict[str, Counter] = defaultdict(Counter)
    rank_all: Counter = Counter()
    polarity_by_stratum: dict[tuple[str, str, bool], Counter] = defaultdict(Counter)
    yes_by_dx: dict[str, Counter] = defaultdict(Counter)
    yes_all: Counter = Counter()
    placed: list[tuple[int, int, tuple[str, str, bool]]] = []
    cache: dict[tuple[str, str], dict[int, list[tuple[str, tuple[str, ...]]]]] = {}
    for n, j in slots:
        item = items[n]
        graph = graphs[item["diagnosis"]]
        step = item["provenance"]["params"]["path"]["steps"][j]
        cid, present = step["criterion"], bool(step["present"])
        crit = graph.criteria[cid]
        key = (graph.id, cid)
        if key not in cache:
            cache[key] = criterion_choices(crit)
        k = _least([rank_by_dx[graph.id], rank_all], sorted(cache[key]), rng)
        criterion, k, deltas = criterion_question(graph, crit, k, rng, cache[key], [cues_by_dx[graph.id], cues_all])
        for totals in (cues_by_dx[graph.id], cues_all):
            totals[:] = [a + b for a, b in zip(totals, deltas)]
        rank_by_dx[graph.id][k] += 1
        rank_all[k] += 1
        if crit.negated_questions:
            stratum = polarity_by_stratum[(graph.id, cid, present)]
            # answer Yes when present and asked positively, or absent and asked negated
            negated = _least([stratum, Counter({n_: yes_by_dx[graph.id][present != n_] for n_ in (False, True)}),
                              Counter({n_: yes_all[present != n_] for n_ in (False, True)})], [False, True], rng)
            stratum[negated] += 1
        else:
            negated = False
        finding = finding_question(crit, present, negated, rng)
        yes = finding["answer"] == YES_NO[0]
        yes_by_dx[graph.id][yes] += 1
        yes_all[yes] += 1
        loop = item["loops"][j]
        loop["criterion"], loop["finding"] = criterion, finding
        surface = item["provenance"]["params"].setdefault("surface", {"criterion_longer_options": [None] * len(item["loops"]),
                                                                          "finding_negated": [None] * len(item["loops"])})
        surface["criterion_longer_options"][j] = int(k)
        surface["finding_negated"][j] = bool(negated)
        if crit.negated_questions:
            placed.append((n, j, (graph.id, cid, present)))
    _repair_yes_balance(items, graphs, placed, polarity_by_stratum, yes_by_dx, yes_all, rng)


def _repair_yes_balance(items: list[dict[str, Any]], graphs: dict[str, DiagnosisGraph], placed: list[tuple[int, int, tuple[str, str, bool]]],
                        strata: dict[tuple[str, str, bool], Counter], yes_by_dx: dict[str, Counter], yes_all: Counter, rng: np.random.Generator) -> None:
    """Flip the wording of one question in an odd-sized stratum while the whole set leans by more than one answer.

    The greedy pass balances each (diagnosis, criterion, finding) stratum first; with
    many strata of odd size their one-question leftovers can add up. Flipping the
    wording of one such question keeps its stratum within one question and moves
    the Yes/No totals by two, towards balance; the answer's truth never changes.
    """
    order = [placed[int(i)] for i in rng.permutation(len(placed))]
    while abs(yes_all[True] - yes_all[False]) > 1:
        lean = yes_all[True] > yes_all[False]  # too many Yes answers when True
        for n, j, key in order:
            finding = items[n]["loops"][j]["finding"]
            yes = finding["answer"] == YES_NO[0]
            negated = bool(items[n]["provenance"]["params"]["surface"]["finding_negated"][j])
            dx = key[0]
            if yes != lean or strata[key][negated] <= strata[key][not negated]:
                continue  # flip only a Yes when Yes leads (and vice versa), from the stratum's majority wording
            if (yes_by_dx[dx][not lean] + 1) - (yes_by_dx[dx][lean] - 1) > 2:
                continue  # the diagnosis would lean the other way
            crit = graphs[dx].criteria[key[1]]
            items[n]["loops"][j]["finding"] = finding_question(crit, key[2], not negated, rng)
            items[n]["provenance"]["params"]["surface"]["finding_negated"][j] = not negated
            strata[key][negated] -= 1
            strata[key][not negated] += 1
            yes_by_dx[dx][lean] -= 1
            yes_by_dx[dx][not lean] += 1
            yes_all[lean] -= 1
            yes_all[not lean] += 1
            break
        else:
            return  # nothing left to flip without unbalancing a stratum or a diagnosis
