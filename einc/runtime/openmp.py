"""OpenMP's wait policy for einc's own timing (`einc run`, the tuner's measuring worker).

By default libgomp's threads spin (busy-wait, about 300,000 turns) at the end of a parallel
region before they sleep. On a machine whose cores are shared with other processes a spinning
thread takes a core the kernel's other threads, or the other processes, need: a 0.2 ms kernel
then takes 8-30 ms, and its times say nothing about the kernel. With `OMP_WAIT_POLICY=passive`
a waiting thread sleeps at once, so a timing measures the kernel.

libgomp reads its environment once, when it is loaded. `timing_env` gives a child process
(the tuner's worker) the passive policy; `passive_while_loading` sets it in this process only
while a kernel library is loaded, and puts the environment back afterwards (child processes
the caller starts later inherit the user's environment, not einc's choice). Either leaves a
policy the user chose (`OMP_WAIT_POLICY`, or `GOMP_SPINCOUNT`) alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager

POLICY_ENV = "OMP_WAIT_POLICY"
USER_CHOICES = (POLICY_ENV, "GOMP_SPINCOUNT")
"""Variables by which a user chose how OpenMP threads wait: einc then leaves the policy alone."""


def user_policy(env: Mapping[str, str] | None = None) -> str | None:
    """The wait policy the user chose in `env` (default: this process's environment), in words;
    None when they chose none."""
    env = os.environ if env is None else env
    if env.get(POLICY_ENV, "").strip():
        return f"{env[POLICY_ENV].strip().lower()} ({POLICY_ENV})"
    if env.get("GOMP_SPINCOUNT", "").strip():
        return f"spin count {env['GOMP_SPINCOUNT'].strip()} (GOMP_SPINCOUNT)"
    return None


def timing_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` for a process that times kernels: `OMP_WAIT_POLICY=passive` unless the
    user chose a policy."""
    out = dict(env)
    if user_policy(out) is None:
        out[POLICY_ENV] = "passive"
    return out


def openmp_loaded() -> bool:
    """Whether an OpenMP runtime (libgomp, libomp, libiomp) is already mapped into this process
    (it has read its environment then; a policy set now would change nothing)."""
    try:
        with open("/proc/self/maps") as maps:
            return any(name in line for line in maps for name in ("libgomp", "libomp.so", "libiomp"))
    except OSError:
        return False


@contextmanager
def passive_while_loading(env: MutableMapping[str, str] | None = None) -> Iterator[str]:
    """Within the block, `OMP_WAIT_POLICY=passive` in this process's environment (unless the
    user chose a policy), restored on exit. Yields the policy the kernels loaded in the block
    get, in words: "passive", the user's choice, or "the runtime's default (OpenMP was already
    loaded)" when an OpenMP runtime was in the process before (its policy is fixed by then)."""
    env = os.environ if env is None else env
    chosen = user_policy(env)
    if chosen is not None:
        yield chosen
        return
    if openmp_loaded():
        yield "the runtime's default (OpenMP was loaded before einc could set a passive policy)"
        return
    env[POLICY_ENV] = "passive"
    try:
        yield "passive"
    finally:
        env.pop(POLICY_ENV, None)
