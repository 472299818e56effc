"""Random legal schedules on SYCL, Poplar and CUDA (where an NVIDIA GPU is): random programs
(tests/oracle/genprog.py) scheduled by random tiles (divisors and not), reorders, unrolls, vectorized innermost loops,
binds of the outer loops to block / thread coordinates and local-memory staging
(cache_read / cache_write "local": a private array per work-item), applied through the
loop-transform utilities (a refused transform leaves the IR as it was), then compiled,
run through the target's real toolchain (SYCL on the Intel OpenCL CPU runtime, Poplar on
einc's CPU harness, CUDA on the GPU through NVRTC and the driver API) and compared with the oracle's float64 meaning.

On Poplar a kernel is one MultiVertex of six workers: loops bound to block ids run one
after another in every worker, loops bound to thread ids are the workers (at most six
threads per block: binding more is refused by the bind, as on any target with its thread
limit), and a kernel that stores elements narrower than a 32-bit word runs its threads in
one worker (einc/targets/poplar.py). A dtype a target refuses by design and a schedule the
mapping pass refuses (ScheduleError) are assumed away; any other exception fails.
OpenCL and HLSL random bind schedules are tests/test_device_differential.py; C random
schedules tests/test_schedules.py.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from xdsl.dialects import affine, func

from einc.compiler.driver import Compilation
from einc.errors import ScheduleError, TargetError
from einc.transforms import loop_transforms as lt
from einc.transforms.gpu_mapping import perfect_chain
from einc.transforms.ranges import max_trip_count
from einc.transforms.loop_analysis import accesses, buffer_name
from einc.transforms.staging import cache_tensor
from einc.targets import description
from tests.oracle.budget import examples
from tests.oracle.compare import check_output
from tests.oracle.corpus import located
from tests.oracle.genprog import GenProgram, programs
from tests.test_device_differential import REFUSED_BY_DESIGN, run_on_device
from tests.test_device_targets import require_run
from tests.test_schedules import check_random_script

EXAMPLES = {"sycl": 10, "poplar": 12, "cuda": 12}
SCRIPT_EXAMPLES = {"opencl": 20, "hlsl": 8, "sycl": 8, "poplar": 8, "cuda": 12}
"""Random transform scripts (tests/oracle/genschedule.py) per target."""
TILES = (2, 3, 4, 5, 6, 7, 8, 16, 32)


def _nests(module: Any) -> list[affine.ForOp]:
    """The statement nests at the top of the host function (not fills, not copies)."""
    found = []
    for f in module.walk():
        if not isinstance(f, func.FuncOp) or not f.body.blocks:
            continue
        for op in f.body.block.ops:
            attrs = op.attributes
            if isinstance(op, affine.ForOp) and lt.STMT_ATTR in attrs and "einc.init" not in attrs:
                found.append(op)
    return found


def _innermost(root: affine.ForOp) -> list[affine.ForOp]:
    return [
        op for op in root.walk()
        if isinstance(op, affine.ForOp) and not any(isinstance(o, affine.ForOp) for o in op.body.walk())
    ]  # fmt: skip


def _applied(module: Any, kind: str, result: Any, before: str, done: list[str]) -> bool:
    if isinstance(result, lt.Failure):
        assert str(module) == before, f"{kind} failed ({result}) but changed the IR"
        return False
    done.append(kind)
    return True


def device_schedule(module: Any, rng: random.Random, max_threads: int) -> list[str]:
    """In place on a loop-level module, per statement nest: maybe reorder its band; maybe
    tile its outermost loop (any size) and bind the tiles to block.x / thread.x (or bind
    the whole loop), and maybe the next loop to block.y or thread.y; maybe unroll and
    maybe tile-and-vectorize innermost loops that are not bound. Returns what applied."""
    done: list[str] = []
    for nest in _nests(module):
        band = perfect_chain(nest)
        if len(band) > 1 and rng.random() < 0.35:
            order = band[:]
            rng.shuffle(order)
            before = str(module)
            result = lt.reorder_loops(order)
            if _applied(module, "reorder", result, before, done):
                band = list(result)  # type: ignore[arg-type]
        top = band[0]
        trip = max_trip_count(top) or 0
        choice = rng.random()
        bound: list[affine.ForOp] = []
        if choice < 0.5 and trip > 1:
            before = str(module)
            tiled = lt.tile_loop(top, rng.choice([s for s in TILES if s <= max_threads] or [1]))
            if _applied(module, "tile", tiled, before, done):
                outer, inner = tiled  # type: ignore[misc]
                top = outer
                for loop, axis in ((outer, "block.x"), (inner, "thread.x")):
                    before = str(module)
                    if _applied(module, f"bind {axis}", lt.bind_loop(loop, axis, max_threads), before, done):
                        bound.append(loop)
        elif choice < 0.75:
            axis = "thread.x" if trip <= max_threads and rng.random() < 0.5 else "block.x"
            before = str(module)
            if _applied(module, f"bind {axis}", lt.bind_loop(top, axis, max_threads), before, done):
                bound.append(top)
        if bound and rng.random() < 0.35:
            nxt = [op for op in bound[-1].body.block.ops if isinstance(op, affine.ForOp)]
            if len(nxt) == 1 and len(list(bound[-1].body.block.ops)) == 2:
                axis = rng.choice(["block.y", "thread.y"])
                before = str(module)
                if _applied(module, f"bind {axis}", lt.bind_loop(nxt[0], axis, max_threads), before, done):
                    bound.append(nxt[0])
        loops = [op for op in top.walk() if isinstance(op, affine.ForOp)]
        if rng.random() < 0.25:  # a tile of a tensor the nest reads or writes, in local memory
            loop = rng.choice(loops)
            access = rng.choice(accesses(loop) or [None])
            if access is not None:
                name = buffer_name(access.buffer)
                write = name in {buffer_name(b) for b in lt.written_groups(loop)}
                before = str(module)
                _applied(module, "cache local", cache_tensor(loop, name, write, "local"), before, done)
        for loop in _innermost(top):  # `top`: the nest's outermost loop now
            if lt.BIND_ATTR in loop.attributes or loop.parent is None:
                continue
            if rng.random() < 0.25:
                before = str(module)
                left = lt.unroll_loop(loop, rng.choice([2, 3, 4]))
                if not _applied(module, "unroll", left, before, done) or not left:
                    continue
                loop = left[0]  # type: ignore[index]
            if rng.random() < 0.4:
                if (max_trip_count(loop) or 0) > 4 and rng.random() < 0.5:
                    before = str(module)
                    tiled = lt.tile_loop(loop, rng.choice([3, 4, 5, 8]))
                    if _applied(module, "tile", tiled, before, done):
                        loop = tiled[1]  # type: ignore[index]
                before = str(module)
                _applied(module, "vectorize", lt.vectorize_loop(loop), before, done)
        module.verify()
    return done


def check_random_schedule(prog: GenProgram, seed: int, target: str) -> None:
    text, input_dict, extra = prog.compile_args()
    comp = Compilation(text, "<random>", input_dict, extra, target, "none")
    try:
        module = comp.run_until("loops").clone()
    except TargetError as err:
        located(err)
        assume(not REFUSED_BY_DESIGN.search(err.message))
        raise
    limit = description(target).max_threads_per_block
    done = device_schedule(module, random.Random(seed), limit)
    note(f"program: {text!r}\ninput_dict: {input_dict}\nextra_outputs: {extra}\ntransforms: {done}")
    note(f"scheduled:\n{module}")
    comp.results["scheduled"] = module
    try:
        comp.run_until("source")
    except ScheduleError as err:
        located(err)
        note(f"schedule refused: {err.message}")
        assume(False)
    except TargetError as err:
        located(err)
        if REFUSED_BY_DESIGN.search(err.message):
            assume(False)
        raise
    note(f"{target} source:\n{comp.results['source']}")
    inputs = prog.make_inputs(np.random.default_rng(seed))
    expected = prog.evaluate(inputs)
    outputs = run_on_device(comp, inputs)
    for name, exp in expected.items():
        check_output(name, outputs[name], exp, f"{target}, seed {seed}")


@pytest.mark.parametrize("target", [pytest.param(t, marks=getattr(pytest.mark, t), id=t) for t in EXAMPLES])
def test_random_legal_schedules_match_oracle(target: str) -> None:
    require_run(target)

    @settings(max_examples=examples(EXAMPLES[target]), deadline=None, suppress_health_check=list(HealthCheck))
    @given(prog=programs(), seed=st.integers(0, 2**32 - 1))
    def run(prog: GenProgram, seed: int) -> None:
        check_random_schedule(prog, seed, target)

    run()


@pytest.mark.parametrize("target", [pytest.param(t, marks=getattr(pytest.mark, t), id=t) for t in SCRIPT_EXAMPLES])
def test_random_schedule_scripts_match_oracle(target: str) -> None:
    """Random legal transform scripts of every op (binds, shared and local staging, rank-0
    results and inputs, unroll / peel / rfactor with local caches) on every device target."""
    require_run(target)

    @settings(max_examples=examples(SCRIPT_EXAMPLES[target]), deadline=None, suppress_health_check=list(HealthCheck))
    @given(prog=programs(), seed=st.integers(0, 2**32 - 1))
    def run(prog: GenProgram, seed: int) -> None:
        check_random_script(prog, seed, target)

    run()
