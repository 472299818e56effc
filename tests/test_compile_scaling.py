"""Compile time grows linearly with the program: a chain of elementwise statements (each
reading the previous one), which the default C schedule fuses into one loop, compiles in
time proportional to its length. The schedule once rescanned the whole module per statement
(every nest's accesses per fusion, a walk of the module per `match`): 400 statements took
about 15 s in the schedule stage alone, 2000 did not finish in two minutes.

benchmarks/compile_scaling.py prints the per-stage curve.
"""

from __future__ import annotations

import cProfile
import pstats
import time

import pytest

from einc.compiler.registry import get_all_passes
from einc.compiler.driver import Compilation
from einc.schedule.default import default_schedule
from einc.targets import get_target
from tests.default_schedule_golden import chain_program


def test_a_400_statement_chain_compiles_in_bounded_time() -> None:
    """All stages to C source in CPU time (the machine may be shared): about 2.5 s on a
    loaded 2-core machine, the bound 5x that; the quadratic schedule took 15 s and more."""
    start = time.process_time()
    source = Compilation(chain_program(400), "chain.ein").run_until("source")
    elapsed = time.process_time() - start
    # the schedule ran: the chain is one loop computing each statement into a local
    assert source.count("for (") == 1 and source.count("_local[1]") == 399, source[:2000]
    assert elapsed < 12.0, f"{elapsed:.1f} s"


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
    """Four times the statements, about four times the calls (4.2 measured; a walk of the
    module per statement gave 14, and with rows, reuse planned for every pair of the fused
    row loop's inner loops, more)."""
    small, large = _schedule_calls(30, rows), _schedule_calls(120, rows)
    assert large < 5 * small, (small, large)


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
