"""Every name the package re-exports resolves, and importing ecgtrace stays light."""

from __future__ import annotations

import subprocess
import sys

import ecgtrace


def test_every_export_resolves():
    for name in ecgtrace.__all__:
        assert getattr(ecgtrace, name) is not None, name


def test_import_is_light():
    code = "import sys, ecgtrace; print(','.join(m for m in ('numpy', 'neurokit2', 'matplotlib', 'langchain_core', 'langgraph') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == ""
