"""Import a module of ``benchmarks/`` (not a package: its scripts import each other as top-level modules)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def import_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module, with ``benchmarks/`` on the path only while it imports."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))
