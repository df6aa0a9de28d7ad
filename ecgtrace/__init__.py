"""ecgtrace: does a multimodal model really read the ECG?

The public API is re-exported here from the modules that implement it. Names
load on first use, so ``import ecgtrace`` (and the CLI's ``--help``) never pays
for numpy, neurokit2, matplotlib or langchain until they are needed::

    import ecgtrace

    result = ecgtrace.synthesize_holter("data", hours=2, seed=1)
    info = ecgtrace.open_record(result.record_path)
    window = ecgtrace.read_window(info, 60.0, 70.0)
    beats = ecgtrace.detect_beats(info)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # errors and shared models
    "EcgTraceError": "ecgtrace.errors",
    "RecordError": "ecgtrace.errors",
    "AnnotationError": "ecgtrace.errors",
    "RubricError": "ecgtrace.errors",
    "Provenance": "ecgtrace.contracts",
    # records and ground truth
    "open_record": "ecgtrace.tools.records",
    "read_window": "ecgtrace.tools.records",
    "read_samples": "ecgtrace.tools.records",
    "iter_chunks": "ecgtrace.tools.records",
    "read_reference_annotations": "ecgtrace.tools.annotations",
    "synthesize_holter": "ecgtrace.tools.synth",
    "load_schedule": "ecgtrace.tools.synth",
    # signal tools
    "detect_beats": "ecgtrace.tools.beats",
    "detect_beats_array": "ecgtrace.tools.beats",
    "classify_beats": "ecgtrace.tools.classify",
    "detect_af": "ecgtrace.tools.af",
    "detect_events": "ecgtrace.tools.rhythm",
    "hr_summary": "ecgtrace.tools.hr",
    "hr_extremum": "ecgtrace.tools.hr",
    "annotate_record": "ecgtrace.tools.annotate",
    "measure_window": "ecgtrace.tools.measure",
    "delineate": "ecgtrace.tools.measure",
    "signal_to_text": "ecgtrace.tools.render",
    "render_png": "ecgtrace.tools.render",
    "render_mp4": "ecgtrace.tools.render",
    # datasets, examinees, metrics
    "build_dataset": "ecgtrace.graphs.holter_build",
    "write_audit_dataset": "ecgtrace.agents.audit.dataset",
    "load_audit": "ecgtrace.agents.audit.format",
    "AuditItem": "ecgtrace.contracts",
    "make_examinee": "ecgtrace.agents.exam.examinees",
    "parse_answer": "ecgtrace.agents.exam.parsing",
    "run_audit": "ecgtrace.graphs.audit_runner",
    "summarize": "ecgtrace.metrics",
    "wilson": "ecgtrace.metrics",
    "mcnemar": "ecgtrace.metrics",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ecgtrace' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
