"""Test-suite setup: `tests.*` importable from the repository root, and Hypothesis profiles.

Profiles (select with EINC_HYPOTHESIS_PROFILE): `default` (the CI budget: the differential
suite runs in under three minutes on two cores), `thorough` (ten times the examples), `quick`
(a smoke run). Tests that set their own example count scale it with
`tests.oracle.budget.examples`.

Every pipeline the tests run verifies the IR after each pass (`EINC_VERIFY_EACH`, the
kernel-level checks of verify-egpu and xDSL's op verifiers; set it to 0 to turn them off).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

os.environ.setdefault("EINC_VERIFY_EACH", "1")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],  # fmt: skip
    print_blob=True,
)
settings.register_profile("default", **_COMMON)
settings.register_profile("thorough", max_examples=1000, **_COMMON)
settings.register_profile("quick", max_examples=10, **_COMMON)
settings.load_profile(os.environ.get("EINC_HYPOTHESIS_PROFILE", "default"))

