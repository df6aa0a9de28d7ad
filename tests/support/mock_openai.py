"""The mock OpenAI-compatible server tests use; it ships in the package (``ecgtrace mock-server``).

Kept here so tests import it from their support folder; the code lives in
:mod:`ecgtrace.agents.exam.mock_server`.
"""

from __future__ import annotations

import sys

from ecgtrace.agents.exam.mock_server import (  # noqa: F401 - re-exported for tests
    MockOpenAI,
    Policy,
    audit_oracle,
    fixed,
    garbage,
    last_question,
    lookup,
    main,
    policy_for,
    turn_key,
)

if __name__ == "__main__":
    sys.exit(main())
