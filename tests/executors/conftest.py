"""A local Ray for the ``--executor ray`` tests, started once per module inside the test process."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_local():
    """``ray.init(num_cpus=2)`` on this machine; the module's tests skip where the ``ray`` extra is absent."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'ecgtrace[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()
