"""How much work a program does: operations and compulsory bytes, to turn times into GFLOP/s or
GB/s and a kernel's distance from the machine's peak or bandwidth."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import arith, math as xmath
from xdsl.dialects.builtin import IndexType, i1
from xdsl.ir import Operation

from einc.dialects import ein
from einc.schedule.choice import ScheduleChoice

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from einc.frontend import Program
    from einc.tune.types import TuneTask

_FREE = (arith.ConstantOp, arith.IndexCastOp, ein.LoadOp, ein.YieldOp, ein.ScatterYieldOp)
"""Body ops that are no arithmetic (constants, index casts, loads, yields)."""


def count_flops(task: TuneTask) -> int:
    """Operations of one run of `task` (`module_flops` of its `ein` module)."""
    return module_flops(task.compilation(ScheduleChoice.NONE).module("ein"))


def _on_data(op: Operation) -> bool:
    """Whether a body op computes on data: not index arithmetic or a predicate (a padded
    read's `.when` condition: its compares, `and`s and index sums are address work, and
    counted as operations they put a padded 5x5 convolution at 4.5 times its FLOPs)."""
    return not any(isinstance(r.type, IndexType) or r.type == i1 for r in op.results)


def module_flops(module: ModuleOp) -> int:
    """Operations of one run of an `ein` module: per iteration point of each statement, one
    per arithmetic op of its body on data (a `math` function counts one; index arithmetic and
    predicates do not, `_on_data`), plus one for a reduction's combine; a multiply-add
    reduction (a matmul) counts 2 per point."""
    total = 0
    for op in module.walk():
        if isinstance(op, ein.EinsumOp | ein.ScatterOp):
            points = math.prod(op.extents.get_values())
            ops = sum(
                1 for o in op.body.walk()
                if o.dialect_name() in (arith.Arith.name, xmath.Math.name) and not isinstance(o, _FREE) and _on_data(o)
            )  # fmt: skip
            if isinstance(op, ein.EinsumOp) and op.is_reduction:
                ops += 1
            total += points * max(ops, 1)
    return total


def count_bytes(task: TuneTask) -> int:
    """Bytes of every input read once and every output written once."""
    return program_bytes(task.program)


def program_bytes(program: Program) -> int:
    """Bytes of every input of `program` read once and every output written once."""
    return sum(
        math.prod(t.shape) * np.dtype(t.dtype).itemsize for t in (*program.inputs, *program.outputs)
    )


def throughput(task: TuneTask, seconds: float) -> tuple[float, str]:
    """The figure a person reads for a time: GFLOP/s for a compute-bound program (more than
    4 operations per compulsory byte), GB/s otherwise."""
    return rate(task.flops, task.bytes_moved, seconds)


def rate(flops: int, nbytes: int, seconds: float) -> tuple[float, str]:
    """`throughput` of a program doing `flops` operations on `nbytes` compulsory bytes."""
    if seconds <= 0 or not math.isfinite(seconds):
        return 0.0, "GFLOP/s"
    if flops > 4 * nbytes:
        return flops / seconds / 1e9, "GFLOP/s"
    return nbytes / seconds / 1e9, "GB/s"
