"""Which device toolchains this machine has, and why not when one is missing.

`available(name)` answers `(True, what was found)` or `(False, why not, and how to install
it)` for a target's toolchain (the target's `toolchain_check`, which asks its runtime) or for
hardware a target runs on (its `hardware_checks`, e.g. `cuda-gpu`: an NVIDIA GPU and its
driver). `scripts/install_toolchains.sh --with-sycl` installs every toolchain, so CI, where
`CI=true`, treats a missing one as a failure (`required`), except those listed in
`EINC_OPTIONAL_TOOLCHAINS`, e.g. `sycl` for a CI that skips the 1.6 GB SYCL wheels; hardware,
which no CI machine has, is never required. A new target takes part through its own class:
nothing here names a target. Answers are cached per process by the runtimes.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from einc.targets import get_all_targets, get_target


def toolchain_targets() -> tuple[str, ...]:
    """The targets that need a toolchain beyond a C compiler."""
    return tuple(name for name in get_all_targets() if get_target(name).needs_toolchain)


def _hardware() -> dict[str, Callable[[], tuple[bool, str]]]:
    checks: dict[str, Callable[[], tuple[bool, str]]] = {}
    for name in get_all_targets():
        checks.update(get_target(name).hardware_checks())
    return checks


def available(name: str) -> tuple[bool, str]:
    """Whether target `name`'s toolchain (or hardware `name`) can be used here, and a
    one-line reason."""
    hardware = _hardware()
    if name in hardware:
        return hardware[name]()
    answer = get_target(name).toolchain_check() if name in toolchain_targets() else None
    if answer is None:
        raise ValueError(f"unknown target '{name}' (known: {', '.join(toolchain_targets() + tuple(hardware))})")
    return answer


def required(name: str) -> bool:
    """A missing toolchain fails the test suite in CI (`CI=true`) unless listed in
    `EINC_OPTIONAL_TOOLCHAINS` (comma-separated); hardware never does."""
    in_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    optional = {t.strip() for t in os.environ.get("EINC_OPTIONAL_TOOLCHAINS", "").split(",")}
    return in_ci and name in toolchain_targets() and name not in optional
