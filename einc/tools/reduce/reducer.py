"""`einc reduce`: shrink a reproducer while it fails the same way.

    result = reduce(repro, budget=Budget(60.0), jobs=2, progress=print)
    result.repro          # the smallest reproducer found that still fails the same way

Each dimension is reduced in turn, by delta debugging (ddmin: drop halves, then quarters, ...,
each candidate tested by a fast replay, einc.tools.reduce.replay.still_fails):

1. the pipeline: the stage hooks' passes and the target's pipeline (`mode: compile`), or the
   pass pipeline (`mode: opt`); what runs after the failing step first of all;
2. the schedule, when the failure does not need one;
3. the statements (a dropped statement still read by a kept one becomes an input; the
   schedule ops of a dropped statement go with it), the declared outputs, the inputs no
   statement reads;
4. the schedule's ops (an op goes with the ops that use its handles), then ops taken out
   with their users given what they were given (a reorder's loops, a tile's loop, a knob's
   value);
5. the expressions: a subexpression replaced by one of its operands or by a constant, an
   output axis dropped (an axis that loses its range gets a `where` range);
6. the shapes: each dimension size lowered (1, 2, 4, half), its equal literals with it;
7. the schedule's sizes (`by N`, a knob's value) lowered;

and again from 2 while anything changed and the budget lasts. The program is first written at
the shape scale the failure was found at (`shape-scale: 1`, so its shapes are literal). The
reduced reproducer is replayed in full at the end.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from einc.tools.reduce import program as prog
from einc.tools.reduce.replay import program_text, replay, still_fails
from einc.tools.reduce.reproducer import Failure, Reproducer, same_way
from einc.tools.reduce.schedule_edits import (
    bypass_edits,
    count_ops,
    schedule_ops,
    size_edits,
    without,
    without_statements,
)
from einc.tools.reduce.tester import Budget, Tester, default_jobs

Progress = Callable[[str], None]


@dataclass
class Result:
    repro: Reproducer
    """The smallest reproducer found (the input's when nothing could be dropped)."""
    original: Reproducer
    tests: int
    seconds: float
    expired: bool
    """Whether the budget ran out before nothing more could be dropped."""
    confirmed: Failure | None
    """The failure the full replay of `repro` showed at the end."""
    lines: list[str] = field(default_factory=list)

    @property
    def kept(self) -> bool:
        return same_way(self.confirmed, self.repro.failure, loose=True, stage=self.repro.mode == "compile")


def ein_ops(repro: Reproducer) -> int | None:
    """The ops of the program's `ein` module (all but the `builtin.module`), or None for an
    MLIR input."""
    if not repro.filename.endswith(".ein"):
        return None
    from einc.frontend import build_module, parse_program

    try:
        module = build_module(parse_program(program_text(repro), repro.filename))
    except Exception:  # noqa: BLE001 - a program the frontend refuses has no ein module
        return None
    return sum(1 for _ in module.walk()) - 1


def program_size(text: str, filename: str) -> tuple[int, int] | None:
    """A `.ein` program's size: its `ein` module's ops, then its length; None when the
    frontend refuses it (a candidate not worth a test). An edit is taken only when it makes
    the size smaller, so the edits end."""
    from einc.frontend import build_module, parse_program

    try:
        module = build_module(parse_program(text, filename))
    except Exception:  # noqa: BLE001 - refused (or a frontend crash: the test will tell)
        return None
    return sum(1 for _ in module.walk()) - 1, len(text)


def size_line(repro: Reproducer) -> str:
    ops = ein_ops(repro)
    parts = [f"{ops} ein ops" if ops is not None else f"{len(repro.program.splitlines())} lines of IR"]
    if repro.filename.endswith(".ein"):
        parts.append(f"{prog.statement_count(program_text(repro), repro.filename)} statements")
    parts.append(f"{count_ops(repro.schedule)} schedule ops")
    passes = _passes(repro)
    parts.append(f"{len(passes)} pipeline passes" if repro.mode == "opt" else f"{len(passes)} hook and target passes")
    return ", ".join(parts)


# ---- the pipeline -----------------------------------------------------------------------------


def split_pipeline(text: str) -> list[str]:
    """A pipeline text's passes (commas inside `{...}` or quotes kept)."""
    passes, depth, quoted, current = [], 0, False, ""
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "{":
            depth += 1
        elif not quoted and ch == "}":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            passes.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        passes.append(current.strip())
    return passes


def _passes(repro: Reproducer) -> list[tuple[str, str]]:
    """The reproducer's removable passes: (where, pass text); where is `pipeline`, `target
    pipeline`, or a hook's stage."""
    if repro.mode == "opt":
        return [("pipeline", p) for p in split_pipeline(repro.pipeline)]
    found = [(stage, p) for stage, passes in repro.hooks for p in split_pipeline(passes)]
    return found + [(_TARGET, p) for p in split_pipeline(_target_pipeline(repro))]


_TARGET = "target pipeline"


def _target_pipeline(repro: Reproducer) -> str:
    if repro.target_pipeline is not None:
        return repro.target_pipeline
    from einc.targets import get_target

    return get_target(repro.target or "c").pipeline


def _with_passes(repro: Reproducer, passes: Sequence[tuple[str, str]]) -> Reproducer:
    if repro.mode == "opt":
        return dataclasses.replace(repro, pipeline=",".join(p for _, p in passes))
    hooks: list[tuple[str, str]] = []
    for stage, p in passes:
        if stage == _TARGET:
            continue
        if hooks and hooks[-1][0] == stage:
            hooks[-1] = (stage, f"{hooks[-1][1]},{p}")
        else:
            hooks.append((stage, p))
    target = ",".join(p for stage, p in passes if stage == _TARGET)
    changed = target != _target_pipeline(repro)
    return dataclasses.replace(repro, hooks=tuple(hooks),
                               target_pipeline=target if changed or repro.target_pipeline is not None else None)  # fmt: skip


# ---- delta debugging ---------------------------------------------------------------------------


class _Reducer:
    def __init__(self, repro: Reproducer, tester: Tester, progress: Progress | None):
        self.best = repro
        self.tester = tester
        self.progress = progress
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        line = f"[{self.tester.budget.spent():6.1f} s, {self.tester.tests:3d} tests] {text}"
        self.lines.append(line)
        if self.progress is not None:
            self.progress(line)

    def first(self, candidates: Sequence[Reproducer | None]) -> Reproducer | None:
        """The first candidate that fails the same way (None entries and repeats skipped)."""
        seen: set[str] = set()
        usable: list[Reproducer] = []
        current = self.best.render()
        for c in candidates:
            if c is None:
                continue
            text = c.render()
            if text in seen or text == current:
                continue
            seen.add(text)
            usable.append(c)
        if not usable or self.tester.budget.expired:
            return None
        index = self.tester.first(usable)
        return usable[index] if index is not None else None

    def ddmin(self, count: int, build: Callable[[Sequence[int]], Reproducer | None], what: str) -> bool:
        """Delta debugging over `count` items: `build(kept indices)` makes a candidate. The
        items kept end in `self.best`; True when any was dropped."""
        kept = list(range(count))
        if count == 0:
            return False
        start = len(kept)
        empty = build([])
        if empty is not None and (found := self.first([empty])) is not None:
            self.best, kept = found, []
        n = 2
        while len(kept) >= 2 and not self.tester.budget.expired:
            size = -(-len(kept) // n)
            chunks = [kept[i : i + size] for i in range(0, len(kept), size)]
            complements = [[k for k in kept if k not in chunk] for chunk in chunks]
            candidates = [build(c) for c in complements]
            found = self.first(candidates)
            if found is not None:
                index = next(i for i, c in enumerate(candidates) if c is found)
                self.best, kept = found, complements[index]
                n = max(n - 1, 2)
                continue
            if n >= len(kept):
                break
            n = min(2 * n, len(kept))
        if len(kept) == 1 and not self.tester.budget.expired:  # the last one, alone
            alone = build([])
            if alone is not None and (found := self.first([alone])) is not None:
                self.best, kept = found, []
        if len(kept) < start:
            self.say(f"{what}: {start} -> {len(kept)}")
            return True
        return False

    # ---- the dimensions --------------------------------------------------------------------
    def pipeline(self) -> bool:
        base = self.best
        passes = _passes(base)
        if not passes:
            return False
        return self.ddmin(len(passes), lambda keep: _with_passes(base, [passes[i] for i in keep]), "passes")

    def no_schedule(self) -> bool:
        """The whole schedule dropped (einc compile's pipeline: no schedule at all)."""
        base = self.best
        if base.schedule is None or base.mode != "compile":
            return False
        none = dataclasses.replace(base, schedule=None)
        if self.first([none]) is not None:
            self.best = none
            self.say(f"schedule: {count_ops(base.schedule)} ops -> none")
            return True
        return False

    def schedule(self) -> bool:
        if self.best.schedule is None:
            return False
        return self._schedule_ops()

    def _schedule_ops(self) -> bool:
        """ddmin over the schedule's ops, then ops taken out with their handles' users given
        what they were given (a reorder, a tile, a knob), then ddmin again."""
        base = self.best
        text = base.schedule
        assert text is not None
        changed = self._ddmin_schedule(base, text)
        bypassed = 0
        while self.best.schedule is not None and not self.tester.budget.expired:
            current = self.best.schedule
            found = self.first([dataclasses.replace(self.best, schedule=t) for t in bypass_edits(current)])
            if found is None:
                break
            self.best, bypassed = found, bypassed + 1
        if bypassed:
            self.say(f"schedule: {bypassed} ops taken out, their handles' users given what they were given")
            text = self.best.schedule
            assert text is not None
            self._ddmin_schedule(self.best, text)
        return changed or bypassed > 0

    def _ddmin_schedule(self, base: Reproducer, text: str) -> bool:
        ops = schedule_ops(text)
        return self.ddmin(len(ops), lambda keep: dataclasses.replace(
            base, schedule=without(text, ops, set(range(len(ops))) - set(keep))), "schedule ops")  # fmt: skip


    def statements(self) -> bool:
        base = self.best
        if not base.filename.endswith(".ein"):
            return False
        text = base.program
        names = prog.statement_names(text, base.filename)
        count = len(names)

        def build(keep: Sequence[int]) -> Reproducer | None:
            cut = prog.cut_statements(text, base.filename, keep)
            if cut is None:
                return None
            schedule = base.schedule
            if schedule is not None:  # the ops of the statements cut go with them
                schedule = without_statements(schedule, {names[i] for i in range(count) if i not in keep})
            return dataclasses.replace(base, program=cut, schedule=schedule)

        changed = self.ddmin(count, build, "statements")
        base = self.best
        names = prog.output_names(base.program, base.filename)
        if names:
            changed |= self.ddmin(len(names), lambda keep: dataclasses.replace(
                base, program=prog.drop_outputs(base.program, base.filename, [names[i] for i in keep])), "outputs")  # fmt: skip
        base = self.best
        unused = prog.drop_unused_inputs(base.program, base.filename)
        fewer = len(prog.parse(unused, base.filename).inputs) < len(prog.parse(base.program, base.filename).inputs)
        if fewer and (found := self.first([dataclasses.replace(base, program=unused)])):
            self.best = found
            self.say("unused inputs dropped")
            changed = True
        return changed

    def expressions(self) -> bool:
        changed = 0
        while not self.tester.budget.expired:
            base = self.best
            if not base.filename.endswith(".ein"):
                break
            texts = [*prog.expression_edits(base.program, base.filename), *prog.axis_edits(base.program, base.filename)]
            current = program_size(base.program, base.filename)
            if current is None:
                break
            sized = [(size, t) for t in texts if (size := program_size(t, base.filename)) is not None and size < current]
            sized.sort(key=lambda st: st[0])  # the smallest first: the first that still fails is the smallest that does
            edits = [dataclasses.replace(base, program=t) for _, t in sized]
            found = self.first(edits)
            if found is None:
                break
            self.best, changed = found, changed + 1
        if changed:
            self.say(f"expressions: {changed} simplified")
        return changed > 0

    def shapes(self) -> bool:
        changed: list[str] = []
        base = self.best
        if not base.filename.endswith(".ein"):
            return False
        for value in prog.dimension_values(base.program, base.filename):
            if self.tester.budget.expired:
                break
            base = self.best
            candidates = [(v, dataclasses.replace(base, program=prog.resize(base.program, base.filename, value, v)))
                          for v in prog.smaller_sizes(value)]  # fmt: skip
            found = self.first([c for _, c in candidates])
            if found is not None:
                self.best = found
                changed.append(f"{value} -> {next(v for v, c in candidates if c is found)}")
        if changed:
            self.say(f"shapes: {', '.join(changed)}")
        return bool(changed)

    def sizes(self) -> bool:
        changed = 0
        while self.best.schedule is not None and not self.tester.budget.expired:
            base = self.best
            text = base.schedule
            assert text is not None
            found = self.first([dataclasses.replace(base, schedule=t) for t in size_edits(text)])
            if found is None:
                break
            self.best, changed = found, changed + 1
        if changed:
            self.say(f"schedule sizes: {changed} lowered")
        return changed > 0


def reduced_filename(filename: str) -> str:
    """`dir/prog.ein` -> `prog.reduced.ein`: the name the reduced program's locations carry."""
    from pathlib import Path

    stem = Path(filename).stem
    return stem if stem.endswith(".reduced") else f"{stem}.reduced.ein"


def materialized(repro: Reproducer) -> Reproducer:
    """The reproducer with its program written at its shape scale (`shape-scale: 1`)."""
    if repro.mode == "opt" and not repro.filename.endswith(".ein"):
        return repro
    return dataclasses.replace(repro, program=program_text(repro), shape_scale=1.0)


def reduce(repro: Reproducer, budget: Budget | None = None, jobs: int | None = None,
           progress: Progress | None = None, timeout: float | None = None) -> Result:  # fmt: skip
    """Shrink `repro` (see the module's doc) within `budget` (default 60 s), testing `jobs`
    candidates at a time (default: the cores, at most 4)."""
    budget = budget or Budget(60.0)
    started = time.perf_counter()
    first = replay(repro, fast=True)  # plugins loaded here, before the children fork
    if first.failure is not None and repro.failure.step is None:
        repro = repro.with_failure(first.failure)
    base = materialized(repro)
    loose = True

    def test(candidate: Reproducer) -> bool:
        return still_fails(candidate, loose=loose)

    tester = Tester(test, jobs or default_jobs(), budget, timeout or max(20.0, 10 * first.seconds))
    reducer = _Reducer(base, tester, progress)
    reducer.say(f"start: {size_line(base)}; {base.failure.describe()}")
    reducer.pipeline()
    while not budget.expired:
        changed = reducer.no_schedule()
        changed |= reducer.statements()
        changed |= reducer.schedule()
        changed |= reducer.expressions()
        changed |= reducer.shapes()
        changed |= reducer.sizes()
        changed |= reducer.pipeline()
        if not changed:
            break
    expired = budget.expired
    best = reducer.best
    if best.program != repro.program and best.filename.endswith(".ein"):  # its locations are not the original's
        best = dataclasses.replace(best, filename=reduced_filename(repro.filename))
    confirmed = replay(best).failure
    if not same_way(confirmed, best.failure, loose=True, stage=best.mode == "compile") and best is not base:
        reducer.say("the full replay of the reduced reproducer fails otherwise: keeping the original")
        best = repro
        confirmed = replay(best).failure
    if confirmed is not None and same_way(confirmed, best.failure, loose=True, stage=best.mode == "compile"):
        best = best.with_failure(dataclasses.replace(confirmed, detail=confirmed.detail or best.failure.detail))
    reducer.say(f"done: {size_line(best)}" + (" (the time budget ran out)" if expired else ""))
    return Result(best, repro, tester.tests, time.perf_counter() - started, expired, confirmed, reducer.lines)
