"""The default C schedule of every shared program, recorded: a change of the policy's
decisions shows up as a difference from `tests/golden/default_schedules.json`. And the
source every program compiles to, recorded: a change of what is compiled shows up as a
difference from `tests/golden/sources.json`.

    PYTHONPATH=. .venv/bin/python tests/default_schedule_golden.py   # rewrite the schedules
    PYTHONPATH=. .venv/bin/python tests/default_schedule_golden.py --sources   # the sources
    PYTHONPATH=. .venv/bin/python tests/default_schedule_golden.py --dump DIR  # texts, to diff

The schedules depend on the host's vector width, so each program is recorded for 128-, 256-
and 512-bit vectors (`EINC_C_VECTOR_BITS`). A schedule is kept in a canonical form (parsed
and printed without value names), so the spelling of its SSA names does not matter.

The sources (`source_cases`): the C and OpenCL source of every shared program (tests/programs.py,
examples/*.ein, the big programs below, chains of both kinds) under the target's default
schedule with 256-bit vectors, every regression-corpus entry on each of its targets under
its own schedule, and each small program under a random legal script of the transform
dialect (tests/oracle/genschedule.py; the scripts are kept in
`tests/golden/random_scripts.json`, drawn once, so a change of the generator or of what
it accepts does not change them). Each is recorded as the SHA-256 of its text, or the
refusal (error class, location and message) where the compile refuses it; `--dump DIR` writes the
texts, to diff two trees' outputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "default_schedules.json"
SOURCES = ROOT / "tests" / "golden" / "sources.json"
SCRIPTS = ROOT / "tests" / "golden" / "random_scripts.json"
VECTOR_BITS = ("128", "256", "512")
SOURCE_TARGETS = ("c", "opencl")


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


def mixed_chain_program(statements: int, length: int = 256, rows: int = 64) -> str:
    """A `.ein` program of `statements` statements over a `rows` x `length` matrix, each
    reading the one before, the shape of a network layer: elementwise steps, a row reduction
    every tenth statement (`temp10[N] +=! temp9[N, C]`, its next statement subtracting it
    from the rows: a normalisation) and a contraction every twentieth (`temp20[N, C] +=!
    temp19[N, K] * input1[K, C]`)."""
    lines = [f"input input0: float32[{rows}, {length}]", f"input input1: float32[{length}, {length}]",
             "temp0[N, C] = input0[N, C] + 1.0"]  # fmt: skip
    last = "temp0"  # the last statement computing a rows x length matrix
    for k in range(1, statements - 1):
        if k % 20 == 0:
            lines.append(f"temp{k}[N, C] +=! {last}[N, K] * input1[K, C]")
        elif k % 10 == 0:
            lines.append(f"temp{k}[N] +=! {last}[N, C]")
            continue
        elif k % 10 == 1 and k > 1 and k % 20 != 1:
            lines.append(f"temp{k}[N, C] = {last}[N, C] - temp{k - 1}[N]")
        else:
            lines.append(f"temp{k}[N, C] = {last}[N, C] + input0[N, C]")
        last = f"temp{k}"
    lines.append(f"output0[N, C] = {last}[N, C] * 2.0")
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


# ---- the sources --------------------------------------------------------------------------------

Case = tuple[str, str, Callable[[], object]]
"""(name, target, a function compiling it to source text)."""


def _compile(text: str, filename: str, inputs: Any = None, extra: Any = None, target: str = "c",
             schedule: Any = None) -> Callable[[], object]:  # fmt: skip
    from einc.compiler.driver import Compilation

    def run() -> object:
        return Compilation(text, filename, inputs, extra, target, schedule, use_records=False).run_until("source")

    return run


def _small_programs() -> Iterator[tuple[str, str, str, Any, Any]]:
    """(name, program text, file name, input_dict, extra_outputs) of the shared programs."""
    from tests.programs import EIN_FILES, PROGRAMS

    for prog in PROGRAMS:
        yield prog.name, prog.ir, prog.name, prog.input_dict, prog.extra_outputs
    for name, text in EIN_FILES:
        yield f"ein:{name}", text, f"{name}.ein", None, None


def source_cases() -> Iterator[Case]:
    """Every compile the source golden records (module docstring), by name and target."""
    from einc.schedule.script import Schedule

    for target in SOURCE_TARGETS:
        for name, text, filename, inputs, extra in _small_programs():
            yield name, target, _compile(text, filename, inputs, extra, target)
        for path in sorted((ROOT / "examples").glob("*.ein")):
            yield f"examples/{path.name}", target, _compile(path.read_text(), str(path), target=target)
        for name, ir, inputs in BIG:
            yield f"big:{name}", target, _compile(ir, name, inputs, target=target)
        for n in (12, 60):
            yield f"chain_{n}", target, _compile(chain_program(n), "chain.ein", target=target)
        yield "chain_rows_12", target, _compile(chain_program(12, 128, rows=16), "chain.ein", target=target)
        yield "mixed_chain_45", target, _compile(mixed_chain_program(45, 64, 16), "mixed.ein", target=target)
    for path in sorted((ROOT / "tests" / "regressions").glob("*.json")):
        entry = json.loads(path.read_text())
        schedule = entry["schedule"]
        if schedule not in (None, "none"):
            schedule = Schedule.parse(schedule, "<schedule>")
        for target in entry["targets"]:
            yield (f"regressions/{path.name}", target,
                   _compile(entry["program"], "<program>", entry["input_dict"], entry["extra_outputs"], target, schedule))  # fmt: skip
    scripts = json.loads(SCRIPTS.read_text())
    for target, by_name in scripts.items():
        programs = {name: rest for name, *rest in _small_programs()}
        for name, script in by_name.items():
            text, filename, inputs, extra = programs[name]
            yield f"script:{name}", target, _compile(text, filename, inputs, extra, target, Schedule.parse(script, "<script>"))


def _outcome(compile: Callable[[], object]) -> str:
    """A compile's source text, or its refusal (`refused ErrorClass at file:line:col: message`)."""
    from einc.errors import EincError

    try:
        result = compile()
    except EincError as err:
        return f"refused {type(err).__name__} at {err.loc}: {err.message}"
    assert isinstance(result, str)
    return result


def _digest(outcome: str) -> str:
    return outcome if outcome.startswith("refused ") else hashlib.sha256(outcome.encode()).hexdigest()


def current_outcomes(with_text: bool = False) -> Iterator[tuple[str, str, str]]:
    """(target, name, digest or refusal; the text with `with_text`) of every source case,
    compiled with 256-bit C vectors."""
    saved = os.environ.get("EINC_C_VECTOR_BITS")
    os.environ["EINC_C_VECTOR_BITS"] = "256"
    try:
        for name, target, compile in source_cases():
            outcome = _outcome(compile)
            yield target, name, outcome if with_text else _digest(outcome)
    finally:
        if saved is None:
            os.environ.pop("EINC_C_VECTOR_BITS", None)
        else:
            os.environ["EINC_C_VECTOR_BITS"] = saved


def current_sources() -> dict[str, dict[str, str]]:
    """{target: {case: SHA-256 of the source, or the refusal}} from the current code."""
    found: dict[str, dict[str, str]] = {}
    for target, name, digest in current_outcomes():
        found.setdefault(target, {})[name] = digest
    return found


def draw_scripts(seed: int = 25) -> dict[str, dict[str, str]]:
    """{target: {program: a random legal script}} for each small program on each source
    target (tests/oracle/genschedule.py), drawn from `seed`; programs without loops to
    schedule are left out."""
    import random

    from einc.compiler.driver import Compilation
    from einc.errors import EincError
    from einc.schedule.script import Schedule
    from tests.oracle.genschedule import random_script

    scripts: dict[str, dict[str, str]] = {}
    for target in SOURCE_TARGETS:
        rng = random.Random(seed)
        for name, text, filename, inputs, extra in _small_programs():
            comp = Compilation(text, filename, inputs, extra, target, "none", use_records=False)
            try:
                comp.run_until("loops")
            except EincError:
                continue
            for _ in range(4):  # one that compiles to source if a few draws give one
                draft = random_script(comp, rng, steps=6)
                if draft.kept:
                    scripts.setdefault(target, {})[name] = draft.text
                    run = _compile(text, filename, inputs, extra, target, Schedule.parse(draft.text, "<script>"))
                    if not _outcome(run).startswith("refused "):
                        break
    return scripts


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    if sys.argv[1:2] == ["--scripts"]:
        SCRIPTS.write_text(json.dumps(draw_scripts(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {SCRIPTS}")
    elif sys.argv[1:2] == ["--sources"]:
        SOURCES.write_text(json.dumps(current_sources(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {SOURCES}")
    elif sys.argv[1:2] == ["--dump"]:
        out = Path(sys.argv[2])
        for target, name, text in current_outcomes(with_text=True):
            path = out / target / (name.replace("/", "_").replace(":", "_") + ".txt")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        print(f"wrote {out}")
    else:
        GOLDEN.write_text(json.dumps(current_texts(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {GOLDEN}")
