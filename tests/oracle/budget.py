"""Example counts for Hypothesis tests under the active profile (see tests/conftest.py)."""

from __future__ import annotations

import os

SCALE = {"default": 1.0, "ci": 1.0, "thorough": 10.0, "quick": 0.1}


def profile() -> str:
    return os.environ.get("EINC_HYPOTHESIS_PROFILE", "default")


def examples(default: int) -> int:
    """`default` examples scaled for the active profile (thorough: ten times as many)."""
    return max(1, round(default * SCALE.get(profile(), 1.0)))
