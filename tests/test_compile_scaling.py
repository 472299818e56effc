"""Compile time grows linearly with the program. A chain of statements (each reading the
previous one, elementwise or mixed with reductions and contractions), which the default C
schedule fuses, compiles with work proportional to its length in every stage: the schedule
once rescanned the whole module per statement (every nest's accesses per fusion, a walk of
the module per `match`, the uses of an input every statement reads per fusion), the loop
lowering the whole function body per rewritten op, the kernel outlining the host block per
kernel. Work is counted, not timed (deterministic): ops made, ops stepped over in blocks
(walks, scans), uses gone through, and pattern applications.

benchmarks/compile_scaling.py prints the per-stage curve. What is compiled stays what it was:
every shared program's C and OpenCL source (and every regression entry's, and random scripts')
is the one recorded in tests/golden/sources.json before compile time was made linear.
"""

from __future__ import annotations

import cProfile
import json
import pstats
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from xdsl.ir import Operation, SSAValue
from xdsl.ir.core import IRUses
from xdsl.utils.worklist import Worklist

from einc.compiler.driver import Compilation
from einc.compiler.registry import get_all_passes
from einc.schedule.default import default_schedule
from einc.targets import get_target
from tests.default_schedule_golden import chain_program, mixed_chain_program


@contextmanager
def counting_work() -> Iterator[Counter[str]]:
    """Inside, the work xDSL does for einc is counted: ops made (clones included), ops stepped
    over in a block (`next_op`/`prev_op`: every walk, block scan and neighbour search goes
    through them), uses of a value gone through, and ops a pattern walker applied its
    patterns to."""
    counts: Counter[str] = Counter()
    init, next_op, prev_op = Operation.__init__, Operation.next_op, Operation.prev_op
    iter_uses, pop = IRUses.__iter__, Worklist.pop

    def made(self: Operation, *args: Any, **kwargs: Any) -> None:
        counts["ops made"] += 1
        init(self, *args, **kwargs)

    def stepped(getter: Callable[[Operation], Operation | None]) -> property:
        def step(self: Operation) -> Operation | None:
            counts["ops stepped"] += 1
            return getter(self)

        return property(step)

    def uses(self: IRUses) -> Iterator[Any]:
        for use in iter_uses(self):
            counts["uses visited"] += 1
            yield use

    def applied(self: Worklist[Any]) -> Any:
        counts["patterns applied"] += 1
        return pop(self)

    assert next_op.fget is not None and prev_op.fget is not None
    patches: list[tuple[type, str, Any]] = [
        (Operation, "__init__", made), (Operation, "next_op", stepped(next_op.fget)),
        (Operation, "prev_op", stepped(prev_op.fget)), (IRUses, "__iter__", uses), (Worklist, "pop", applied),
    ]  # fmt: skip
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in patches]
    try:
        for cls, name, value in patches:
            setattr(cls, name, value)
        yield counts
    finally:
        for cls, name, value in saved:
            setattr(cls, name, value)


def mixed_work(target: str) -> dict[tuple[str, int], Counter[str]]:
    """The work of compiling mixed chains of 50 and 500 statements to `target`'s source (each
    target's compiles made in the test that checks them: xdist may run the two on two workers)."""
    found = {}
    for statements in (50, 500):
        with counting_work() as counts:
            Compilation(mixed_chain_program(statements), "mixed.ein", target=target, use_records=False).run_until("source")
        found[target, statements] = counts
    return found


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_a_500_statement_mixed_compile_does_work_linear_in_its_size(target: str) -> None:
    """A 500-statement mixed chain (a reduction every tenth statement, a contraction every
    twentieth) compiles to source with at most 11.5 times the work of its 50-statement
    prefix, by each count (10.4 measured; before, 57 times the ops stepped over and 43
    times the uses on C, 17 times the ops stepped over on OpenCL, whose launches each
    looked their kernel up through the whole module when verified), and within a fixed
    budget per statement."""
    work = mixed_work(target)
    small, large = work[target, 50], work[target, 500]
    assert set(small) == {"ops made", "ops stepped", "uses visited", "patterns applied"}
    for kind in small:
        assert large[kind] <= 11.5 * small[kind], (kind, small[kind], large[kind])
    # measured with the tests' EINC_VERIFY_EACH=1 (C; OpenCL): ops made 83; 188, ops stepped
    # 1464; 5055, uses visited 91; 152, patterns applied 40; 134 per statement. OpenCL's were
    # 42, 1527, 29 and 76 before the device default schedule (einc/schedule/policies/gpu.py):
    # each contraction's 8x8 register tile is unrolled (about 500 ops a contraction, one
    # statement in twenty here) and each reduction's plan is tried on a copy of its nest
    # before it is made; an elementwise statement's chunk of elements stays a loop.
    # einc-vectorize-global made OpenCL's 188, 4863, 133, 134 per statement (500) into 199,
    # 5974, 215, 177: each elementwise chunk is now strip-mined into 16-byte vectors (the
    # vectorizer, then canonicalize on its index maps) and each register tile's input rows
    # are combined into vector loads; the ratio to the 50-statement prefix stays 11.1.
    # PoCL's `tall_rows` default (a 16x8 register tile, twice the 8x8's unrolled body, one
    # statement in twenty) made these 290, 9529, 346 and 276 per statement (500), the ratio to
    # the 50-statement prefix 11.3-11.4 (linear)
    per_statement = {"ops made": 100, "ops stepped": 2000, "uses visited": 110, "patterns applied": 95}
    if target == "opencl":
        per_statement = {"ops made": 320, "ops stepped": 11000, "uses visited": 400, "patterns applied": 320}
    for kind, budget in per_statement.items():
        assert large[kind] <= 500 * budget, (kind, large[kind])


def _schedule_calls(statements: int, rows: int | None = None) -> int:
    """Python function calls made building the default schedule of a chain and applying it
    (deterministic, unlike times)."""
    loops = Compilation(chain_program(statements, 256, rows), "chain.ein").run_until("loops")
    profile = cProfile.Profile()
    profile.enable()
    schedule = default_schedule(get_target("c"), loops)
    assert schedule is not None
    scheduled = schedule.apply(loops, get_all_passes())
    profile.disable()
    assert str(scheduled).count("affine.for") == (1 if rows is None else statements + 1)  # all fused
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("rows", [None, 8])
def test_the_schedule_work_grows_linearly_with_the_chain(rows: int | None) -> None:
    """Ten times the statements, about ten times the calls, builtins' included (9.7 and 9.8
    measured; a walk of the module per statement gave far more, and with rows, reuse planned
    for every pair of the fused row loop's inner loops; 11.7 and 16.7 before the watch of a
    compute_at into a long fused loop stopped at its limit and a vectorized loop's index
    entry was found inside it instead of among the fused loop's every statement)."""
    small, large = _schedule_calls(50, rows), _schedule_calls(500, rows)
    assert large < 11 * small, (small, large)


def test_indexed_matches_find_what_a_walk_finds(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every match of every shared program's default schedule (fusions, tiles, peels,
    reorders, caches: the transforms that insert, move and erase loops) finds, through the
    loop index, the loops a walk of the whole module finds, in the same order."""
    from xdsl.dialects import affine

    from einc.transforms.loops import STMT
    from einc.schedule.interpreter import EincTransformFunctions
    from tests.default_schedule_golden import loop_modules

    indexed = EincTransformFunctions._indexed_loops
    checked = []

    def both(self, op, stmt):  # type: ignore[no-untyped-def]
        found = indexed(self, op, stmt)
        walked = [x for x in self.payload.walk() if isinstance(x, affine.ForOp) and x.attributes.get(STMT) == stmt]
        assert found == walked, op
        checked.append(len(found))
        return found

    monkeypatch.setattr(EincTransformFunctions, "_indexed_loops", both)
    for _, loops in loop_modules():
        schedule = default_schedule(get_target("c"), loops)
        if schedule is not None:
            schedule.apply(loops, get_all_passes())
    assert len(checked) > 200 and max(checked) > 1


def test_sources_match_the_recorded_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each compile of tests/default_schedule_golden.py's `source_cases` (the shared programs,
    examples, big programs and chains on C and OpenCL under the default schedule, the
    regression corpus under its own schedules, random scripts of every transform op) gives
    the source (or the located refusal) recorded in tests/golden/sources.json: a speed-up
    must not change what is compiled. Regenerate only for an intended change of output
    (`--dump DIR` of two trees to see the difference)."""
    from tests.default_schedule_golden import SOURCES, current_sources

    monkeypatch.setenv("EINC_VERIFY_EACH", "0")  # what is compiled, not the IR between passes
    recorded = json.loads(SOURCES.read_text())
    current = current_sources()
    assert set(current) == set(recorded) and {"c", "opencl"} <= set(recorded)
    for target, cases in recorded.items():
        assert set(current[target]) == set(cases), target
        assert sum(not digest.startswith("refused ") for digest in cases.values()) >= len(cases) * 3 // 4
        changed = [name for name, digest in cases.items() if current[target][name] != digest]
        assert not changed, f"{target}: the source of {changed} changed"


def test_unwritten_buffers_stay_unwritten(monkeypatch: pytest.MonkeyPatch) -> None:
    """compute_at trusts LoopIndex.unwritten (the arguments no store writes, found once per
    index) instead of going through the uses of every input per statement fused: each time
    it is asked, while the default schedules and the random scripts of the shared programs
    are built and applied, no argument it names has a store (einc's transforms never store
    into a buffer that had none)."""
    from einc.schedule.script import Schedule
    from einc.transforms.loops import LoopIndex, is_stored
    from tests.default_schedule_golden import SCRIPTS, loop_modules

    cached = LoopIndex.unwritten
    asked: list[int] = []

    def checked(self: LoopIndex) -> frozenset[SSAValue]:
        found = cached(self)
        assert not any(is_stored(arg) for arg in found)
        asked.append(len(found))
        return found

    monkeypatch.setattr(LoopIndex, "unwritten", checked)
    modules = dict(loop_modules())
    for name, loops in modules.items():
        schedule = default_schedule(get_target("c"), loops)
        if schedule is not None:
            schedule.apply(loops, get_all_passes())
    for name, script in json.loads(SCRIPTS.read_text())["c"].items():
        if "compute_at" in script:
            Schedule.parse(script).apply(modules[name], get_all_passes())
    assert len(asked) > 50 and max(asked) > 1


def test_a_default_schedule_is_applied_as_it_was_built() -> None:
    """The driver takes the default schedule's scratch payload as the schedule applied to the
    loops (Schedule.take_applied: it is interpreted once per compile, not twice): for every
    shared program, that payload is what applying the schedule to the loops gives, each op
    at the same location."""
    from einc.tools.jobs import print_ir
    from tests.default_schedule_golden import loop_modules

    passes = get_all_passes()
    taken = 0
    for name, loops in loop_modules():
        schedule = default_schedule(get_target("c"), loops)
        if schedule is None:
            continue
        applied = print_ir(schedule.apply(loops, passes), debuginfo=True)
        assert schedule.built_on is not None and schedule.built_on[0] is loops
        assert print_ir(schedule.take_applied(loops, passes), debuginfo=True) == applied, name
        assert schedule.built_on is None  # taken once: a second take applies it anew
        assert print_ir(schedule.take_applied(loops, passes), debuginfo=True) == applied, name
        taken += 1
    assert taken > 50


def test_stages_collect_garbage_less_often_and_restore_the_collector() -> None:
    """Inside `fewer_collections` (each driver stage) the youngest generation is collected
    every YOUNG_COLLECTION_THRESHOLD allocations; the thresholds are put back when the last
    user leaves (nested, or from threads), and a higher threshold is never lowered."""
    import gc
    import threading

    from einc.compiler.driver import YOUNG_COLLECTION_THRESHOLD, fewer_collections

    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with fewer_collections():
            assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, 10, 10)
            inside = threading.Event()
            leave = threading.Event()

            def other() -> None:
                with fewer_collections():
                    inside.set()
                    leave.wait(10)

            thread = threading.Thread(target=other)
            thread.start()
            inside.wait(10)
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, 10, 10)  # the thread is inside
        leave.set()
        thread.join()
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(10 * YOUNG_COLLECTION_THRESHOLD, 5, 5)
        with fewer_collections():
            assert gc.get_threshold() == (10 * YOUNG_COLLECTION_THRESHOLD, 5, 5)
        assert gc.get_threshold() == (10 * YOUNG_COLLECTION_THRESHOLD, 5, 5)
    finally:
        gc.set_threshold(*saved)
