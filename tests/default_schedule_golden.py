"""The default C schedule of every shared program, recorded: a change of the policy's
decisions shows up as a difference from `tests/golden/default_schedules.json`.

    PYTHONPATH=. .venv/bin/python tests/default_schedule_golden.py   # rewrite the golden file

The schedules depend on the host's vector width, so each program is recorded for 128-, 256-
and 512-bit vectors (`EINC_C_VECTOR_BITS`). A schedule is kept in a canonical form (parsed
and printed without value names), so the spelling of its SSA names does not matter.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "default_schedules.json"
VECTOR_BITS = ("128", "256", "512")


def _f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


CONV2D = "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in {ho}, WO in {wo}"
SOFTMAX = (
    "temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
    "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]"
)
LAYER_NORM = (
    "temp0[N] +=! input0[N, C] / 64.0; temp1[N] +=! (input0[N, C] - temp0[N]) * (input0[N, C] - temp0[N]); "
    "output0[N, C] = (input0[N, C] - temp0[N]) / temp1[N]"
)

BIG = [
    # shapes big enough for the register blocking, the parallel loops and the reductions
    ("matmul_100x130x70", "output0[N, M] +=! input0[N, K] * input1[K, M]", {"input0": _f32(100, 70), "input1": _f32(70, 130)}),
    ("matmul_130x256x128", "output0[N, M] +=! input0[N, K] * input1[K, M]", {"input0": _f32(130, 128), "input1": _f32(128, 256)}),
    ("matmul_f16", "output0[N, M] +=! input0[N, K] * input1[K, M]",
     {"input0": {"dtype": "float16", "shape": [128, 128]}, "input1": {"dtype": "float16", "shape": [128, 128]}}),
    ("batch_matmul", "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]", {"input0": _f32(4, 96, 128), "input1": _f32(4, 128, 64)}),
    ("conv_a", CONV2D.format(ho=18, wo=18), {"input0": _f32(2, 8, 20, 20), "input1": _f32(8, 8, 3, 3)}),
    ("conv_b", CONV2D.format(ho=18, wo=34), {"input0": _f32(1, 3, 19, 35), "input1": _f32(6, 3, 2, 2)}),
    ("conv_c", CONV2D.format(ho=4, wo=38), {"input0": _f32(1, 4, 6, 40), "input1": _f32(12, 4, 3, 3)}),
    ("conv_narrow", CONV2D.format(ho=6, wo=6), {"input0": _f32(1, 4, 8, 8), "input1": _f32(8, 4, 3, 3)}),
    ("row_sum", "output0[N] +=! input0[N, C]", {"input0": _f32(33, 1000)}),
    ("row_sum_short", "output0[N] +=! input0[N, C]", {"input0": _f32(64, 8)}),
    ("dot_rows", "output0[N] +=! input0[N, C] * input1[N, C]", {"input0": _f32(5, 4096), "input1": _f32(5, 4096)}),
    ("softmax", SOFTMAX, {"input0": _f32(64, 1024)}),
    ("layer_norm", LAYER_NORM, {"input0": _f32(32, 64)}),
    ("stencil", "temp0[N, C] = input0[N, C] * 2.0; output0[N, C] = temp0[N, C] + temp0[N, C + 1] where C in 63",
     {"input0": _f32(64, 64)}),
    ("elementwise_big", "temp0[N, C] = input0[N, C] + 1.0; output0[N, C] = temp0[N, C] * input0[N, C]", {"input0": _f32(256, 256)}),
    ("mlp", "temp0[N, M] +=! input0[N, K] * input1[K, M]; output0[N, M] = temp0[N, M].call(`max`, [0.0])",
     {"input0": _f32(128, 128), "input1": _f32(128, 128)}),
]


def chain_program(statements: int, length: int = 1024, rows: int | None = None) -> str:
    """A `.ein` program of `statements` elementwise statements, each reading the previous:
    over a vector of `length`, or a `rows` x `length` matrix (fused at the row loop, the
    chain is then one inner loop per statement)."""
    shape, at = (f"{length}", "[N]") if rows is None else (f"{rows}, {length}", "[N, C]")
    lines = [f"input input0: float32[{shape}]", f"temp0{at} = input0{at} + 1.0"]
    lines += [f"temp{k}{at} = temp{k - 1}{at} + input0{at}" for k in range(1, statements - 1)]
    lines.append(f"output0{at} = temp{statements - 2}{at} * 2.0")
    return "\n".join(lines) + "\n"


def loop_modules() -> Iterator[tuple[str, ModuleOp]]:
    """Every program's loop module (the default schedule's input), by name."""
    from einc.compiler.driver import Compilation
    from tests.programs import EIN_FILES, PROGRAMS

    for prog in PROGRAMS:
        yield prog.name, Compilation(prog.ir, prog.name, prog.input_dict, prog.extra_outputs, "c").run_until("loops")
    for name, text in EIN_FILES:
        yield f"ein:{name}", Compilation(text, f"{name}.ein").run_until("loops")
    for path in sorted((ROOT / "examples").glob("*.ein")):
        yield f"examples/{path.name}", Compilation(path.read_text(), str(path)).run_until("loops")
    for name, ir, inputs in BIG:
        yield f"big:{name}", Compilation(ir, name, inputs).run_until("loops")
    yield "chain_12", Compilation(chain_program(12), "chain.ein").run_until("loops")
    yield "chain_rows_12", Compilation(chain_program(12, 128, rows=16), "chain.ein").run_until("loops")


def canonical(schedule: Any) -> str:
    """A schedule (a Schedule or its text) printed without value names."""
    from einc.schedule.script import Schedule

    module = (Schedule.parse(schedule) if isinstance(schedule, str) else schedule).module.clone()
    for op in module.walk():
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    arg.name_hint = None
        for result in op.results:
            result.name_hint = None
    return str(module)


def current_texts() -> dict[str, dict[str, str | None]]:
    """{vector bits: {program: canonical default schedule, or None}} from the current code."""
    from einc.schedule.default import default_schedule
    from einc.targets import get_target

    saved = os.environ.get("EINC_C_VECTOR_BITS")
    texts: dict[str, dict[str, str | None]] = {}
    try:
        for bits in VECTOR_BITS:
            os.environ["EINC_C_VECTOR_BITS"] = bits
            texts[bits] = {}
            for name, loops in loop_modules():
                schedule = default_schedule(get_target("c"), loops)
                texts[bits][name] = None if schedule is None else canonical(schedule)
    finally:
        if saved is None:
            os.environ.pop("EINC_C_VECTOR_BITS", None)
        else:
            os.environ["EINC_C_VECTOR_BITS"] = saved
    return texts


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(current_texts(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
