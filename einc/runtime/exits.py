"""A child process's exit status in words (the device-compile helper, the tuner's workers)."""

from __future__ import annotations

import signal


def describe_exit(code: int | None) -> str:
    """A process's exit status in words: the signal that killed it, or its exit code."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name} ({signal.strsignal(-code) or 'unknown signal'})"
    return f"exited with status {code}"
