"""Which records a benchmark may tune on and which it only scores (one home for the split).

MIT-BIH follows the inter-patient protocol of de Chazal et al. (2004): DS1 is
for tuning and training, DS2 for scoring only, and the paced records are left
out of classification. ``../shared/data`` holds DS1, the paced records and one
DS2 record (100); the rest of DS2 is kept out of the folder on purpose.

Every table marks a record ``tuned`` (its labels were used to set a
threshold, fit a model, or choose a rule) or ``untuned`` (scored only).
Record 100 (DS2) is ``untuned`` for the classifier from model 2 on (it was in
the training set of model 1) and for the detector's settings from version 3
on; the version-2 detector settings were chosen on all 27 shared records
including 100, so 100 is flagged ``DS2*`` in detection tables.

QTDB's ``sel1xx``/``sel2xx`` records are 15-minute excerpts of MIT-BIH
records: those cut from records in ``../shared/data`` inherit their status
(DS1 and paced: tuned); those cut from DS2 records that are not here are
untuned. SVDB, QTDB's other records and the synthetic record's beats
(no threshold was set on it, except the electrode-motion bursts of the
artifact index) are untuned.

A record whose signal was looked at while a detector rule was designed is
``examined`` for detection (``DETECTION_EXAMINED`` says which rule): no
threshold was set on it, but its failures pointed at the rule. Detection
tables flag it and leave it out of "strict untuned", and the signal-trust
table shows it in a column of its own that the trust decision never reads.
Its classification status (on the expert's beat positions) is unchanged.

VFDB is split by record: 418-422 (96 expert VF/VFIB/VFL episodes, and VT and
noise to reject) are for tuning the VF/VFL detector, 423-428 (5 episodes,
812 s) are scored only. Until wave detector version 3 no threshold was set on
VFDB at all; from version 3 on the first half is ``tuned``.
"""

from __future__ import annotations

from ecgtrace.tools._classify_train import DS1_RECORDS, DS2_RECORDS, PACED_RECORDS

__all__ = ["DETECTION_EXAMINED", "DS1_RECORDS", "DS2_RECORDS", "PACED_RECORDS", "QTDB_DS2", "QTDB_TUNED", "VFDB_SCORED", "VFDB_TUNED",
           "mitdb_status", "qtdb_detection_status", "qtdb_status", "vfdb_status"]

#: QTDB excerpts of MIT-BIH records that are in ../shared/data (DS1 or paced): tuned through their source.
QTDB_TUNED = frozenset(f"sel{r}" for r in (*DS1_RECORDS, *PACED_RECORDS))
#: QTDB excerpts of MIT-BIH DS2 records that are not in ../shared/data: untuned, and scored with MIT-BIH DS2
#: (sel100 is excluded: record 100 itself is in ../shared/data).
QTDB_DS2 = frozenset(f"sel{r}" for r in DS2_RECORDS if r != "100")


def mitdb_status(record: str) -> str:
    """``DS1 tuned``, ``paced tuned``, ``DS2*`` (record 100; see the module note) or ``DS2``."""
    if record in DS1_RECORDS:
        return "DS1 tuned"
    if record in PACED_RECORDS:
        return "paced tuned"
    return "DS2*" if record == "100" else "DS2"


def qtdb_status(record: str) -> str:
    """``tuned`` for excerpts of shared DS1/paced records, ``DS2*`` for sel100, else ``untuned``."""
    if record in QTDB_TUNED:
        return "tuned"
    return "DS2*" if record == "sel100" else "untuned"


#: QTDB records examined for detection, and the rule whose design looked at them.
DETECTION_EXAMINED: dict[str, str] = {
    "sel232": "beat detector v4 (faint-beat check): its false beats in long pauses showed the level collapse the check answers",
}


def qtdb_detection_status(record: str) -> str:
    """:func:`qtdb_status`, except ``examined`` for a record in :data:`DETECTION_EXAMINED`."""
    return "examined" if record in DETECTION_EXAMINED else qtdb_status(record)


#: VFDB records the VF/VFL detector may be tuned on, and those it is only scored on.
VFDB_TUNED = frozenset(("418", "419", "420", "421", "422"))
VFDB_SCORED = frozenset(("423", "424", "425", "426", "427", "428"))


def vfdb_status(record: str) -> str:
    """``tuned`` for 418-422, ``untuned`` for 423-428; a record outside both halves is an error (the split must say)."""
    if record in VFDB_TUNED:
        return "tuned"
    if record in VFDB_SCORED:
        return "untuned"
    raise KeyError(f"VFDB record {record!r} is in neither half of the split (benchmarks/_protocol.py)")
