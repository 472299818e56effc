"""Running a module at its level and comparing its outputs with the oracle.

    level_of(module)                  "ein", "loops" or "egpu" (anything below the loops)
    run_at_level(module, inputs, oracle) -> LevelRun

The levels and their executors:
- `ein`: `einc.semantics.reference.run_reference`, the vectorized NumPy executor of the `ein` dialect
  (each einsum evaluated at once over its iteration domain), so a pass that rewrites the ein
  module is checked;
- `loops` (affine/scf/memref/arith/math): `einc.semantics.egpu.run_lowered` (loop nests run as
  NumPy lanes) where it exists, else `einc.semantics.loops.run_interpreted`, xDSL's per-element
  interpreter with einc's bounds-checked, dtype-rounding functions;
- `egpu` (kernels, work-items, vector and narrow ops, a target's legalized IR):
  `einc.semantics.egpu.run_lowered` where it exists; without it, the loop interpreter when the
  module has only loop-level ops, else not run ("no interpreter for this level: <op>").

An op an interpreter lacks is `ran=False` with the reason (not a failure); anything else the
execution raises is the step's failure (`crashed=True`).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from types import ModuleType

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from einc.tools.numerics.types import LevelRun, OutputCheck

LOOP_DIALECTS = frozenset({"builtin", "func", "affine", "scf", "arith", "math", "memref"})
"""The dialects einc.semantics.loops's loop interpreter executes."""

Executor = Callable[[ModuleOp, Mapping[str, np.ndarray]], dict[str, np.ndarray]]


class NotExecutable(Exception):
    """The module holds an op no executor here implements (a reason, not a failure)."""


def _payload_ops(module: ModuleOp) -> list[Operation]:
    """The module's ops, without an embedded schedule (`transform.*`, not executed)."""
    return [op for top in module.ops if top.dialect_name() != "transform" for op in top.walk()]


def level_of(module: ModuleOp) -> str:
    dialects = {op.dialect_name() for op in _payload_ops(module)}
    if "ein" in dialects:
        return "ein"
    return "loops" if dialects <= LOOP_DIALECTS else "egpu"


def _foreign_op(module: ModuleOp) -> str | None:
    """The first op the loop interpreter has no implementation for, by name."""
    for op in _payload_ops(module):
        if op.dialect_name() not in LOOP_DIALECTS:
            return op.name
    return None


def _run_ein(module: ModuleOp, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    from einc.semantics.reference import run_reference

    with np.errstate(all="ignore"):
        return run_reference(module, inputs)


def _interp_egpu() -> ModuleType | None:
    """einc.semantics.egpu, or None in an einc without it."""
    try:
        return importlib.import_module("einc.semantics.egpu")
    except ModuleNotFoundError as err:
        if err.name != "einc.semantics.egpu":
            raise
        return None


def _run_loops(module: ModuleOp, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """einc.semantics.egpu's lane-vectorized interpreter where it exists (50-100x faster on loop
    nests), else einc.semantics.loops's per-element one."""
    interp_egpu = _interp_egpu()
    if interp_egpu is not None:
        return _run_lowered(module, inputs)
    from einc.semantics.loops import run_interpreted

    return run_interpreted(module, inputs)


def fast_interpreter() -> bool:
    """Whether the loop levels run on einc.semantics.egpu (the default scale may be larger)."""
    return _interp_egpu() is not None


def _run_lowered(module: ModuleOp, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """einc.semantics.egpu's interpreter (imported when first needed: it may not exist in this
    einc); without it, the loop interpreter for a module it can run."""
    interp_egpu = _interp_egpu()
    if interp_egpu is None:
        from einc.semantics.loops import run_interpreted

        foreign = _foreign_op(module)
        if foreign is not None:
            raise NotExecutable(f"no interpreter for this level: {foreign}")
        return run_interpreted(module, inputs)
    try:
        return interp_egpu.run_lowered(module, inputs)
    except interp_egpu.UnsupportedIR as err:
        raise NotExecutable(f"no interpreter for this level: {err}") from None


EXECUTORS: dict[str, Executor] = {"ein": _run_ein, "loops": _run_loops, "egpu": _run_lowered}


def run_at_level(
    module: ModuleOp, inputs: Mapping[str, np.ndarray], oracle: Mapping[str, np.ndarray],
    tolerances: Mapping[str, float],
) -> LevelRun:  # fmt: skip
    """Execute `module` at its level on `inputs` and compare each output with `oracle`."""
    level = level_of(module)
    start = time.perf_counter()
    try:
        outputs = EXECUTORS[level](module, inputs)
    except NotExecutable as err:
        return LevelRun(level, ran=False, reason=str(err))
    except Exception as exc:  # noqa: BLE001 - the module crashed its executor: the step failed
        return LevelRun(level, ran=True, reason=describe(exc), crashed=True,
                        seconds=time.perf_counter() - start)  # fmt: skip
    seconds = time.perf_counter() - start
    return LevelRun(level, ran=True, outputs=compare_all(outputs, oracle, tolerances), seconds=seconds,
                    values=outputs)  # fmt: skip


def run_source(
    runner: Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], object],
    inputs: Mapping[str, np.ndarray], oracle: Mapping[str, np.ndarray],
    tolerances: Mapping[str, float], specs: Mapping[str, tuple[tuple[int, ...], str]], level: str,
) -> LevelRun:  # fmt: skip
    """Run a built kernel (`runner(inputs, outputs)`) into NaN/0x5A-poisoned outputs."""
    from einc.runtime.arrays import poisoned

    outputs = {name: poisoned(shape, dtype) for name, (shape, dtype) in specs.items()}
    start = time.perf_counter()
    try:
        runner(dict(inputs), outputs)
    except Exception as exc:  # noqa: BLE001 - the printed kernel failed on its runtime
        return LevelRun(level, ran=True, reason=describe(exc), crashed=True,
                        seconds=time.perf_counter() - start)  # fmt: skip
    seconds = time.perf_counter() - start
    return LevelRun(level, ran=True, outputs=compare_all(outputs, oracle, tolerances), seconds=seconds,
                    values=outputs)  # fmt: skip


def describe(exc: BaseException) -> str:
    """An exception as one line: einc's errors rendered, others with their class."""
    render = getattr(exc, "render", None)
    if callable(render):
        text = str(render())
        return text.splitlines()[0] if text else type(exc).__name__
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


# ---- comparison -------------------------------------------------------------------------------


def compare_all(
    got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], tolerances: Mapping[str, float]
) -> tuple[OutputCheck, ...]:
    checks = []
    for name, expected in want.items():
        if name not in got:
            checks.append(OutputCheck(name, False, float("inf"), float("inf"), tolerances[name]))
            continue
        checks.append(compare(name, np.asarray(got[name]), np.asarray(expected), tolerances[name]))
    return tuple(checks)


def compare(name: str, got: np.ndarray, want: np.ndarray, tolerance: float) -> OutputCheck:
    """`got` against the float64 oracle `want`, as `einc run` judges (einc.semantics.compare.max_error:
    the error relative to the oracle's largest magnitude, at least 1); the first element
    outside the tolerance in row-major order."""
    if got.shape != want.shape:
        return OutputCheck(name, False, float("inf"), float("inf"), tolerance)
    if got.size == 0:
        return OutputCheck(name, True, 0.0, 0.0, tolerance)
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    finite = np.isfinite(w)
    scale = max(1.0, float(np.max(np.abs(w[finite]), initial=0.0)))
    with np.errstate(all="ignore"):
        diff = np.abs(g - w)
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        diff = np.where(same, 0.0, np.where(np.isnan(diff), np.inf, diff))
        rel = np.where(diff == 0.0, 0.0, diff / np.maximum(np.abs(w), np.finfo(np.float64).tiny))
    bad = diff > tolerance * scale
    max_abs, max_rel = float(np.max(diff)), float(np.max(rel))
    if not bad.any():
        return OutputCheck(name, True, max_abs, max_rel, tolerance)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad.reshape(-1))), bad.shape))
    return OutputCheck(name, False, max_abs, max_rel, tolerance, index, float(g[index]), float(w[index]))
