"""Pass statistics and debug counters, as MLIR has them (`--pass-statistics`,
`--debug-counter=PASS-skip=N,PASS-count=M`).

    with instrumenting(Statistics()) as stats:          # every pass run inside is counted
        run_pipeline(ctx, module, "canonicalize,cse")
    sys.stderr.write(stats.render())

    counters = parse_counters("canonicalize-skip=2,canonicalize-count=1")
    with instrumenting(Statistics(counters)):           # canonicalize applies its 3rd rewrite only
        ...

While `instrumenting` is on, two hooks are installed, and removed when it ends (off, nothing
is changed, so nothing costs):

- xDSL's `PassPipeline.apply` (the pipelines einc runs: the driver's stages and stage hooks,
  `einc.compiler.registry.run_pipeline`, a schedule's `apply_registered_pass`) and einc-opt's
  own pass loop (`pass_scope`) bracket each pass: the ops it created and erased (by identity:
  any pass, with the rewriter or without), its runs and time.
- xDSL's `PatternRewriteWalker.rewrite_region` (every pass that applies rewrite patterns:
  einc's, xDSL's, a plugin's): each pattern is wrapped so that its rewrites are counted, and a
  listener (xDSL's `PatternRewriterListener`, the walker's own mechanism) counts the ops the
  rewriter inserted, erased, modified in place and replaced, each for the pattern that was
  running (or for the driver's folding and dead-code removal, outside any pattern).

A rewrite is one call of a pattern that changed the IR through the rewriter. A debug counter
counts a pass's rewrites in each run of the pass from 0 (einc compiles a program more than once
for `--check-numerics`; each compilation applies the same rewrites): the first `skip` are not
applied, the next `count` are (-1: all of them), the ones after are not (MLIR's
`-debug-counter`). A skipped rewrite is offered again when the walker goes over the module
again, and counted again, as in MLIR's greedy driver. A
rewrite is stopped at its first call to the rewriter, before that call changes anything; a
pattern that changes the IR before calling the rewriter cannot be stopped (it is applied).
Not thread-safe: the hooks are process-wide (the command-line tools turn them on).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation, Region
from xdsl.passes import ModulePass, PassPipeline
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriterListener,
    PatternRewriteWalker,
    RewritePattern,
)

__all__ = [
    "DebugCounter",
    "PassCounts",
    "PatternCounts",
    "Rewrite",
    "Statistics",
    "active",
    "instrumenting",
    "parse_counters",
    "pass_scope",
]

DRIVER = "(folding and dead code)"
"""The name the rewrites of a walker's driver (folding, trivially dead ops) are counted under."""
OUTSIDE = "(outside any pass)"
"""The pass name of rewrites made outside a pass (a schedule's transform ops)."""


@dataclass
class PatternCounts:
    """One pattern's work in one pass."""

    rewrites: int = 0
    """Calls of the pattern that changed the IR."""
    skipped: int = 0
    """Rewrites a debug counter stopped."""
    inserted: int = 0
    erased: int = 0
    modified: int = 0
    """Ops the rewriter was told were changed in place (operands replaced, `notify_op_modified`)."""
    replaced: int = 0


@dataclass(frozen=True)
class Rewrite:
    """One rewrite of a pass (recorded with `Statistics(record=True)`)."""

    index: int
    """Its number among the pass's rewrites, from 0 (what `PASS-skip` counts)."""
    pattern: str
    op: str
    """The name of the op the pattern was matching."""
    location: Attribute
    """That op's location."""
    applied: bool


@dataclass
class PassCounts:
    """One pass's work, over all its runs."""

    name: str
    runs: int = 0
    seconds: float = 0.0
    created: int = 0
    """Ops in the module after a run that were not in it before (any pass)."""
    erased: int = 0
    """Ops in the module before a run that are not in it after."""
    patterns: dict[str, PatternCounts] = field(default_factory=dict)
    """Per pattern, for passes that rewrite with xDSL's pattern rewriter."""
    rewrites: list[Rewrite] = field(default_factory=list)

    def pattern(self, name: str) -> PatternCounts:
        found = self.patterns.get(name)
        if found is None:
            found = self.patterns[name] = PatternCounts()
        return found

    def total(self, what: str) -> int:
        return sum(getattr(p, what) for p in self.patterns.values())


@dataclass
class DebugCounter:
    """`PASS-skip=N,PASS-count=M`: which of a run of a pass's rewrites are applied."""

    skip: int = 0
    count: int = -1
    seen: int = 0
    """Rewrites counted in the pass's current run."""
    counted: int = 0
    """Rewrites counted over all its runs."""
    applied: int = 0
    """Rewrites applied over all its runs."""

    def start(self) -> None:
        """A new run of the pass: its rewrites are counted from 0."""
        self.seen = 0

    def should_apply(self) -> bool:
        index, self.seen = self.seen, self.seen + 1
        ok = index >= self.skip and (self.count < 0 or index < self.skip + self.count)
        self.counted += 1
        self.applied += ok
        return ok


_COUNTER = re.compile(r"\s*(?P<name>[\w.-]+?)-(?P<what>skip|count)\s*=\s*(?P<value>-?\d+)\s*")


def parse_counters(text: str) -> dict[str, DebugCounter]:
    """`a-skip=2,a-count=1,b-count=0` as counters by pass name; a ValueError naming the item
    that is not `PASS-skip=N` or `PASS-count=M` (N >= 0, M >= -1)."""
    counters: dict[str, DebugCounter] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        found = _COUNTER.fullmatch(item)
        if found is None:
            raise ValueError(f"'{item.strip()}' is not PASS-skip=N or PASS-count=M")
        value = int(found["value"])
        if value < (0 if found["what"] == "skip" else -1):
            raise ValueError(f"'{item.strip()}': {found['what']} must be at least {0 if found['what'] == 'skip' else -1}")
        counter = counters.setdefault(found["name"], DebugCounter())
        setattr(counter, found["what"], value)
    return counters


class Statistics:
    """What the passes run while `instrumenting(self)` did, per pass (in the order they
    first ran); `counters` (pass name -> DebugCounter) choose which rewrites apply, and
    `record` keeps every rewrite (`PassCounts.rewrites`)."""

    def __init__(self, counters: Mapping[str, DebugCounter] | None = None, record: bool = False):
        self.passes: dict[str, PassCounts] = {}
        self.counters: dict[str, DebugCounter] = dict(counters or {})
        self.record = record
        self._frames: list[_Frame] = []

    def counts(self, name: str) -> PassCounts:
        found = self.passes.get(name)
        if found is None:
            found = self.passes[name] = PassCounts(name)
        return found

    def frame(self) -> _Frame:
        """The innermost pass running (a frame for rewrites outside any pass otherwise)."""
        if not self._frames:
            return _Frame(self.counts(OUTSIDE), self.counters.get(OUTSIDE), self.record, [], 0.0)
        return self._frames[-1]

    def begin(self, p: ModulePass, module: Operation) -> _Frame:
        before = _all_ops(module)  # kept alive: an erased op's id is not reused by a new one
        counter = self.counters.get(p.name)
        if counter is not None:
            counter.start()
        frame = _Frame(self.counts(p.name), counter, self.record, before, time.perf_counter())
        frame.ids = set(map(id, before))
        self._frames.append(frame)
        return frame

    def end(self, frame: _Frame, module: Operation) -> None:
        if frame in self._frames:
            self._frames.remove(frame)
        counts = frame.counts
        counts.runs += 1
        counts.seconds += time.perf_counter() - frame.started
        after = set(map(id, _all_ops(module)))
        counts.created += len(after - frame.ids)
        counts.erased += len(frame.ids - after)
        frame.before, frame.ids = [], set()

    def render(self) -> str:
        """MLIR's statistics report: each pass, its counts, then its patterns."""
        rule = "===" + "-" * 73 + "==="
        lines = [rule, "... Pass statistics report ...".center(79).rstrip(), rule]
        for counts in self.passes.values():
            runs = f"{counts.runs} run{'s' if counts.runs != 1 else ''}, {counts.seconds * 1e3:.1f} ms"
            lines.append(f"'{counts.name}' ({runs})" if counts.name != OUTSIDE else f"{counts.name}")
            rows = [(counts.created, "ops-created", "ops in the module after the pass that were not before"),
                    (counts.erased, "ops-erased", "ops in the module before the pass that are not after")]  # fmt: skip
            if counts.patterns:
                rows += [
                    (counts.total("rewrites"), "rewrites", "pattern applications that changed the IR"),
                    (counts.total("inserted"), "ops-inserted", "ops the rewriter inserted"),
                    (counts.total("erased"), "ops-erased-by-rewriter", "ops the rewriter erased"),
                    (counts.total("modified"), "ops-modified", "ops changed in place"),
                    (counts.total("replaced"), "ops-replaced", "ops replaced by new values"),
                ]  # fmt: skip
            width = max(len(str(n)) for n, _, _ in rows)
            lines += [f"  (S) {n:>{width}} {name:<22} - {what}" for n, name, what in rows]
            counter = self.counters.get(counts.name)
            if counter is not None:
                lines.append(f"  debug counter: skip={counter.skip} count={counter.count}: {counter.counted} rewrites "
                             f"counted, {counter.applied} applied (each run counted from 0)")  # fmt: skip
            if counts.patterns:
                lines.append("  patterns:                              rewrites inserted erased modified replaced")
                for name, p in sorted(counts.patterns.items(), key=lambda kv: (-kv[1].rewrites, kv[0])):
                    skipped = f"  ({p.skipped} stopped by the debug counter)" if p.skipped else ""
                    lines.append(f"    {name[:36]:<36} {p.rewrites:>8} {p.inserted:>8} {p.erased:>6} "
                                 f"{p.modified:>8} {p.replaced:>8}{skipped}")  # fmt: skip
        if not self.passes:
            lines.append("(no pass ran)")
        for name, counter in self.counters.items():
            if name not in self.passes:
                lines.append(f"debug counter '{name}': no pass of that name ran")
            elif not self.passes[name].patterns and counter.counted == 0:
                lines.append(f"debug counter '{name}': the pass made no rewrite through xDSL's pattern rewriter "
                             "(a counter counts those), so it changed nothing")  # fmt: skip
        return "\n".join(lines) + "\n"


def _all_ops(root: Operation) -> list[Operation]:
    """`root` and every op inside it, in no particular order (twice as fast as `walk()`)."""
    found = [root]
    index = 0
    while index < len(found):
        for region in found[index].regions:
            for block in region.blocks:
                found.extend(block.ops)
        index += 1
    return found


@dataclass(eq=False)
class _Frame:
    counts: PassCounts
    counter: DebugCounter | None
    record: bool
    before: list[Operation]
    started: float
    pattern: str | Operation | None = None
    """The pattern running now (an op: the canonicalization of that op; None: the walker's
    driver)."""
    ids: set[int] = field(default_factory=set)
    """The ids of `before`'s ops."""


_ACTIVE: Statistics | None = None
_SAVED: list[tuple[object, object]] = []


def active() -> Statistics | None:
    """The statistics being collected, or None (the hooks are off)."""
    return _ACTIVE


@contextmanager
def instrumenting(stats: Statistics) -> Iterator[Statistics]:
    """Collect `stats` (and apply its counters) while the block runs; nests (the inner
    collection wins until it ends)."""
    global _ACTIVE
    previous = _ACTIVE
    if previous is None:
        _SAVED.append((PassPipeline.apply, PatternRewriteWalker.rewrite_region))
        setattr(PassPipeline, "apply", _pipeline_apply)  # noqa: B010 - a hook, removed below
        setattr(PatternRewriteWalker, "rewrite_region", _rewrite_region)  # noqa: B010
    _ACTIVE = stats
    try:
        yield stats
    finally:
        _ACTIVE = previous
        if previous is None:
            apply, rewrite_region = _SAVED.pop()
            setattr(PassPipeline, "apply", apply)  # noqa: B010
            setattr(PatternRewriteWalker, "rewrite_region", rewrite_region)  # noqa: B010


@contextmanager
def pass_scope(p: ModulePass, module: Operation) -> Iterator[None]:
    """Count what `p` does to `module` inside the block (nothing when statistics are off)."""
    stats = _ACTIVE
    if stats is None:
        yield
        return
    frame = stats.begin(p, module)
    try:
        yield
    finally:
        stats.end(frame, module)


def _pipeline_apply(self: PassPipeline, ctx: Context, op: ModuleOp) -> None:
    """xDSL's `PassPipeline.apply` (the same callbacks), each pass in a `pass_scope`."""
    passes = self.passes
    if self.callback is not None:
        self.callback(None, op, passes[0] if passes else None)
    for index, p in enumerate(passes):
        with pass_scope(p, op):
            p.apply(ctx, op)
        if self.callback is not None:
            self.callback(p, op, passes[index + 1] if index + 1 < len(passes) else None)


_ORIGINAL_REWRITE_REGION = PatternRewriteWalker.rewrite_region


def _rewrite_region(self: PatternRewriteWalker, region: Region) -> bool:
    """xDSL's walk, its patterns counted (and stopped by a debug counter) and a listener
    counting the rewriter's inserts, erasures, in-place changes and replacements."""
    stats = _ACTIVE
    if stats is None:
        return _ORIGINAL_REWRITE_REGION(self, region)
    frame = stats.frame()
    pattern, listener = self.pattern, self.listener
    undo: list[Callable[[], None]] = []
    self.pattern = _instrument(pattern, frame, undo)

    def count(what: str) -> Callable[..., None]:
        def handler(*_: object) -> None:
            running = frame.pattern
            name = running if isinstance(running, str) else DRIVER if running is None else _canonicalization(running)
            counts = frame.counts.pattern(name)
            setattr(counts, what, getattr(counts, what) + 1)

        return handler

    ours = PatternRewriterListener(
        operation_insertion_handler=[*listener.operation_insertion_handler, count("inserted")],
        operation_removal_handler=[*listener.operation_removal_handler, count("erased")],
        operation_modification_handler=[*listener.operation_modification_handler, count("modified")],
        operation_replacement_handler=[*listener.operation_replacement_handler, count("replaced")],
        block_creation_handler=list(listener.block_creation_handler),
    )  # fmt: skip
    self.listener = ours
    try:
        return _ORIGINAL_REWRITE_REGION(self, region)
    finally:
        self.pattern, self.listener = pattern, listener
        for step in reversed(undo):
            step()


def _unwrapped(pattern: RewritePattern) -> RewritePattern:
    """A wrapping pattern's innermost pattern (einc's `Located(pattern)`)."""
    seen = 0
    while isinstance(inner := getattr(pattern, "pattern", None), RewritePattern) and seen < 8:
        pattern, seen = inner, seen + 1
    return pattern


def _instrument(pattern: RewritePattern, frame: _Frame, undo: list[Callable[[], None]]) -> RewritePattern:
    """`pattern` counted: an applier's patterns each counted (its list swapped, and put back
    by `undo`), any other pattern wrapped."""
    inner = _unwrapped(pattern)
    if isinstance(inner, GreedyRewritePatternApplier):
        old = inner.rewrite_patterns
        inner.rewrite_patterns = [_instrument(p, frame, undo) for p in old]
        undo.append(lambda: setattr(inner, "rewrite_patterns", old))
        return pattern
    return _Counted(pattern, _pattern_name(inner), frame)


def _pattern_name(pattern: RewritePattern) -> str | None:
    """The pattern's class name (None for xDSL's canonicalization pattern, which is named
    by the op it canonicalizes)."""
    name = type(pattern).__name__
    return None if name == "CanonicalizationRewritePattern" else name


def _canonicalization(op: Operation) -> str:
    return f"{op.name} canonicalization"


class _Skipped(BaseException):
    """A debug counter stopped this rewrite (a BaseException: a pattern's `except Exception`
    does not swallow it)."""


@dataclass(eq=False)
class _Guard:
    counter: DebugCounter
    frame: _Frame
    pattern: str
    op: Operation
    decided: bool = False
    applied: bool = True

    def enter(self) -> None:
        if not self.decided:
            self.decided = True
            self.applied = self.counter.should_apply()
            if self.frame.record:
                self.frame.counts.rewrites.append(
                    Rewrite(self.counter.seen - 1, self.pattern, self.op.name, self.op.location, self.applied)
                )
        if not self.applied:
            raise _Skipped


class _GuardedRewriter(PatternRewriter):
    """The walker's rewriter while a pattern runs under a debug counter (its class swapped
    for the call): the first change a pattern asks for asks the counter first."""

    _einc_guard: _Guard


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _guarded(method: Callable[_P, _R]) -> Callable[_P, _R]:
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        guard = getattr(args[0], "_einc_guard", None)
        if isinstance(guard, _Guard):
            guard.enter()
        return method(*args, **kwargs)

    return call


_CHANGES: Sequence[str] = (
    "insert", "erase", "replace_all_uses_with", "replace_uses_with_if", "replace",
    "replace_value_with_new_type", "insert_block_argument", "erase_block_argument", "inline_block",
    "move_region_contents_to_new_regions", "inline_region", "notify_op_modified", "create_block",
)  # fmt: skip
for _name in _CHANGES:
    setattr(_GuardedRewriter, _name, _guarded(getattr(PatternRewriter, _name)))


@dataclass(eq=False)
class _Counted(RewritePattern):
    """`pattern`, each of its rewrites counted for `frame`'s pass under `name` (None: named
    by the op, `arith.addf canonicalization`), and stopped when the pass's debug counter says so."""

    pattern: RewritePattern
    name: str | None
    frame: _Frame

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        frame = self.frame
        if frame.counter is None and not frame.record:  # the common case, kept short: statistics only
            outer = frame.pattern
            frame.pattern = self.name or op
            acted = rewriter.has_done_action
            try:
                self.pattern.match_and_rewrite(op, rewriter)
            finally:
                frame.pattern = outer
            if rewriter.has_done_action and not acted:
                frame.counts.pattern(self.name or _canonicalization(op)).rewrites += 1
            return
        name = self.name or _canonicalization(op)
        outer, frame.pattern = frame.pattern, name
        guard: _Guard | None = None
        cls = type(rewriter)
        if frame.counter is not None and cls is PatternRewriter:
            guard = _Guard(frame.counter, frame, name, op)
            rewriter.__class__ = _GuardedRewriter
            setattr(rewriter, "_einc_guard", guard)  # noqa: B010 - the guarded class's attribute
        acted = rewriter.has_done_action
        try:
            self.pattern.match_and_rewrite(op, rewriter)
        except _Skipped:
            frame.counts.pattern(name).skipped += 1
        finally:
            if guard is not None:
                rewriter.__class__ = cls
                delattr(rewriter, "_einc_guard")
            frame.pattern = outer
        if rewriter.has_done_action and not acted and (guard is None or guard.applied):
            frame.counts.pattern(name).rewrites += 1
            if guard is None and frame.record:
                index = len(frame.counts.rewrites)
                frame.counts.rewrites.append(Rewrite(index, name, op.name, op.location, True))


def requested(statistics: bool, counters: Sequence[str] | str | None) -> Statistics | None:
    """The Statistics that `--pass-statistics` and `--debug-counter SPEC` (given once or
    more) ask for, or None when neither is given; a ValueError for a malformed SPEC."""
    texts = [counters] if isinstance(counters, str) else list(counters or ())
    parsed: dict[str, DebugCounter] = {}
    for text in texts:
        parsed.update(parse_counters(text))
    if not statistics and not parsed:
        return None
    return Statistics(parsed)
