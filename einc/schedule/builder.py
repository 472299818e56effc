"""Building a schedule as ops, step by step, on a scratch payload.

    b = ScheduleBuilder(loops.clone())         # the payload each step transforms at once
    k = b.knob("output0.tile_j", 64, (16, 32, 128))
    n = b.handle(loop)                          # `transform.einc.match` of the loop's tags
    outer, inner = b.tile(n, k)                 # the op, run on the payload as it is made
    done = b.try_(lambda: b.vectorize(b.handle(inner_loop)))
    if isinstance(done, Failure): ...           # the step was illegal: schedule unchanged
    schedule = b.finish()                       # a Schedule (never text)

Each method creates one `transform.einc.*` op (einc.dialects.einc_transform) at the end of
`transform.named_sequence @__transform_main` and runs it at once through the interpreter's
own implementation (einc.schedule.interpreter.EincTransformFunctions) on the scratch payload: a policy
sees what the schedule will do, and an illegal step fails as it would when the schedule is
applied. Outside `try_` an illegal step raises `IllegalStep` (a bug in the policy, not a
user error); inside, `try_` returns the failure as a value and removes the ops the attempt
made. Handles are SSA values; `loops(h)` gives the payload ops a handle holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

from xdsl.builder import Builder
from xdsl.dialects import affine, transform
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.interpreter import Interpreter
from xdsl.interpreters.transform import OperationHandle
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from einc.dialects import einc_transform as et
from einc.errors import ScheduleError
from einc.transforms import loop_transforms as lt
from einc.schedule.script import ENTRY, Schedule
from einc.schedule.interpreter import EincTransformFunctions, LocatingListener, handle_ops

if TYPE_CHECKING:
    from einc.transforms.compute_at import ComputeAtPlan

T = TypeVar("T")

Failure = lt.Failure
"""What `try_` returns for an illegal step: the transform's own message."""


class IllegalStep(Exception):
    """A step the payload refuses, outside `try_` (a policy that should have tried it)."""


_READ_ONLY = (et.MatchOp, et.KnobOp)
"""Ops that leave the payload as it is (an attempt may fail after them and be undone)."""


class ScheduleBuilder:
    """A `@__transform_main` under construction and the payload its ops have transformed."""

    def __init__(self, payload: ModuleOp, filename: str = "<schedule>", cloned_from: ModuleOp | None = None):
        """`cloned_from`: the module `payload` is a clone of, when the schedule is for it: the
        driver then takes the payload as the schedule applied to it (Schedule.take_applied)
        instead of applying the schedule again."""
        self.payload = payload
        self.cloned_from = cloned_from
        self._knob_ops: dict[str, et.KnobOp] = {}  # the knobs made, by name (a rolled-back one is detached)
        body = Block(arg_types=[et.HANDLE])
        self.sequence = transform.NamedSequenceOp(ENTRY, ([et.HANDLE], []), Region(body))
        self.schedule = Schedule(ModuleOp([self.sequence]), filename)
        self.root: SSAValue = body.args[0]
        self.builder = Builder(InsertPoint.at_end(body))
        self.handles: dict[Operation, SSAValue] = {}
        """payload loop -> the handle that names it (made by `handle` or `remember`)"""
        # the payload's ops located as Schedule.apply locates them (the same payload)
        self.locating = LocatingListener(self.schedule, payload)
        self.interpreter = Interpreter(self.schedule.module, listeners=(self.locating,))
        self.functions = EincTransformFunctions(self.schedule, payload)
        self.interpreter.register_implementations(self.functions)
        self.interpreter.set_values([(self.root, OperationHandle(payload))])
        self._attempt: list[bool] | None = None  # in `try_`: [whether a step changed the payload]
        self._undo: list[tuple[Operation, SSAValue | None]] = []  # handles named, to forget

    # -- the mechanism ----------------------------------------------------------------------
    def _step(self, op: Operation) -> tuple[SSAValue, ...]:
        """Insert `op` and run it on the payload; an illegal step is removed again."""
        self.builder.insert(op)
        try:
            results = self.interpreter.run_op(op, self.interpreter.get_values(op.operands))
        except ScheduleError as err:
            self.locating.forget()
            op.detach()
            op.erase()
            if self._attempt is not None and self._attempt[0]:
                raise AssertionError(f"{op.name} failed after a step of the same attempt changed the payload") from err
            raise IllegalStep(err.message) from None
        if self._attempt is not None and not isinstance(op, _READ_ONLY):
            self._attempt[0] = True
        self.interpreter.set_values(zip(op.results, results))
        return tuple(op.results)

    def try_(self, attempt: Callable[[], T]) -> T | Failure:
        """`attempt()` (steps of this builder), or the Failure of its illegal step, with the
        ops it made removed and the handles as before. Only its last step may change the
        payload (matches and knobs before it are free): the payload is left as it was."""
        block = self.sequence.body.block
        mark, undo, outer = block.last_op, len(self._undo), self._attempt
        last_match = self.functions.last_match
        self._attempt = [False]
        try:
            return attempt()
        except IllegalStep as failure:
            while block.last_op is not mark:
                op = block.last_op
                assert op is not None
                op.detach()
                op.erase()
            while len(self._undo) > undo:
                loop, previous = self._undo.pop()
                if previous is None:
                    del self.handles[loop]
                else:
                    self.handles[loop] = previous
            self.functions.last_match = last_match  # the payload's loop index is still true
            return Failure(str(failure))
        finally:
            if outer is not None and self._attempt[0]:
                outer[0] = True
            if outer is None:
                self._undo.clear()  # kept: nothing left to undo
            self._attempt = outer

    def loops(self, handle: SSAValue) -> list[affine.ForOp]:
        """The payload ops `handle` holds now."""
        (value,) = self.interpreter.get_values([handle])
        return cast("list[affine.ForOp]", list(handle_ops(value)))  # a loop handle's

    def loop(self, handle: SSAValue) -> affine.ForOp:
        """The one payload loop `handle` holds."""
        (loop,) = self.loops(handle)
        return loop

    def remember(self, loops: Iterable[Operation], handles: Iterable[SSAValue]) -> None:
        """Name each loop by its handle from now on (`handle(loop)` returns it)."""
        for loop, h in zip(loops, handles):
            self._name(loop, h)

    def _name(self, loop: Operation, h: SSAValue) -> None:
        if self._attempt is not None:
            self._undo.append((loop, self.handles.get(loop)))
        self.handles[loop] = h

    def empty(self) -> bool:
        return self.sequence.body.block.first_op is None

    def finish(self) -> Schedule:
        """The schedule (ended by `transform.yield`); the builder is done (its payload, the
        schedule applied to `cloned_from`, goes with the schedule: `Schedule.built_on`)."""
        self.builder.insert(transform.YieldOp())
        if self.cloned_from is not None:
            self.schedule.built_on = (self.cloned_from, self.payload)
        return self.schedule

    # -- handles and knobs ------------------------------------------------------------------
    def match(
        self, stmt: str | None = None, axis: str | None = None, init: bool = False, op_name: str | None = None,
        root: SSAValue | None = None,
    ) -> SSAValue:
        """`transform.einc.match`: the payload loops (or `op_name` ops) with these tags, nested
        in the ops `root` holds (default: anywhere)."""
        (h,) = self._step(et.MatchOp(root or self.root, op_name, stmt, axis, init))
        return h

    def handle(self, loop: affine.ForOp) -> SSAValue:
        """The handle naming `loop`: remembered, or a match of its tags (made once)."""
        if loop not in self.handles:
            stmt, axis = loop.attributes[lt.STMT_ATTR], loop.attributes[lt.AXIS_ATTR]
            assert isinstance(stmt, StringAttr) and isinstance(axis, StringAttr)
            self._name(loop, self.match(stmt.data, axis.data, "einc.init" in loop.attributes))
        return self.handles[loop]

    def knob(self, name: str, value: int, options: Iterable[int]) -> SSAValue:
        """`transform.einc.knob`: a tunable size, `value` now, a search may pick any of the
        options (sorted, `value` among them). A name the schedule has already is numbered
        (`output0.tile_cols.2`: a statement split into nests, each with its knobs)."""
        def taken(n: str) -> bool:  # a knob op of that name still in the sequence
            op = self._knob_ops.get(n)
            return op is not None and op.parent_block() is self.sequence.body.block

        unique, n = name, 1
        while taken(unique):
            n += 1
            unique = f"{name}.{n}"
        op = et.KnobOp(unique, sorted(set(options) | {value}), value)
        (k,) = self._step(op)
        self._knob_ops[unique] = op
        return k

    # -- loop transforms --------------------------------------------------------------------
    def tile(self, h: SSAValue, size: SSAValue | int) -> tuple[SSAValue, SSAValue]:
        outer, inner = self._step(et.TileOp(h, size))
        return outer, inner

    def peel(self, h: SSAValue, size: SSAValue | int) -> tuple[SSAValue, SSAValue]:
        main, rest = self._step(et.PeelOp(h, size))
        return main, rest

    def split_conditions(self, h: SSAValue, inside: bool = False) -> SSAValue:
        (pieces,) = self._step(et.SplitConditionsOp(h, inside))
        return pieces

    def group_lanes(self, h: SSAValue, size: SSAValue | int, interleaved: bool = False) -> tuple[SSAValue, SSAValue]:
        outer, lanes = self._step(et.GroupLanesOp(h, size, interleaved))
        return outer, lanes

    def distribute(self, h: SSAValue, count: int) -> tuple[SSAValue, ...]:
        return self._step(et.DistributeOp(h, count))

    def coalesce(self, h: SSAValue, depth: SSAValue | int = 2) -> SSAValue:
        (coalesced,) = self._step(et.CoalesceOp(h, depth))
        return coalesced

    def split_phases(self, h: SSAValue, stride: SSAValue | int) -> SSAValue:
        (phases,) = self._step(et.SplitPhasesOp(h, stride))
        return phases

    def unroll(self, h: SSAValue, factor: SSAValue | int) -> SSAValue:
        (left,) = self._step(et.UnrollOp(h, factor))
        return left

    def rfactor(self, h: SSAValue, factor: SSAValue | int) -> tuple[SSAValue, SSAValue]:
        partials, combine = self._step(et.RfactorOp(h, factor))
        return partials, combine

    def reorder(self, handles: Sequence[SSAValue]) -> tuple[SSAValue, ...]:
        return self._step(et.ReorderOp(list(handles)))

    def rotate(self, handles: Sequence[SSAValue], by: SSAValue | int) -> tuple[SSAValue, ...]:
        return self._step(et.RotateOp(list(handles), by))

    def parallelize(self, h: SSAValue) -> None:
        self._step(et.ParallelizeOp(h))

    def vectorize(self, h: SSAValue) -> None:
        self._step(et.VectorizeOp(h))

    def vectorize_reduction(self, h: SSAValue) -> None:
        self._step(et.VectorizeReductionOp(h))

    def bind(self, h: SSAValue, axis: str, max_threads: int | None = None) -> None:
        self._step(et.BindOp(h, axis, max_threads))

    def fuse(self, first: SSAValue, second: SSAValue) -> SSAValue:
        (fused,) = self._step(et.FuseOp(first, second))
        return fused

    def tensorize(self, h: SSAValue, intrinsic: str) -> SSAValue:
        """The 16 x 16 x K float16/bfloat16 band at `h` on tensor cores ("mma.m16n8k16" on
        CUDA, "mfma.16x16x16" on HIP); returns the lane loop."""
        (lanes,) = self._step(et.TensorizeOp(h, intrinsic))
        return lanes

    def reuse(self, first: SSAValue, second: SSAValue) -> None:
        self._step(et.ReuseOp(first, second))

    def compute_at(self, producer: SSAValue, loop: SSAValue, plan: ComputeAtPlan | None = None) -> None:
        """`plan`: plan_compute_at's answer for these two loops on the payload as it is now
        (a policy that planned to decide), applied instead of planned again."""
        self.functions.planned = plan
        try:
            self._step(et.ComputeAtOp(producer, loop))
        finally:
            self.functions.planned = None

    def reverse_compute_at(self, consumer: SSAValue, loop: SSAValue) -> None:
        self._step(et.ReverseComputeAtOp(consumer, loop))

    def cache_read(
        self, tensor: str, at: SSAValue, memory: str = "local", layout: tuple[int, ...] | None = None,
        pad: int | None = None, halo: bool = False, split: tuple[int, int] | None = None,
    ) -> SSAValue:
        (buffer,) = self._step(et.CacheReadOp(at, tensor, memory, layout, pad, halo, split))
        return buffer

    def prefetch(self, tensor: str, at: SSAValue, distance: int, spread: SSAValue | None = None,
                 evenly: bool = False) -> SSAValue:  # fmt: skip
        (made,) = self._step(et.PrefetchOp(at, tensor, distance, spread, evenly))
        return made

    def cache_write(self, tensor: str, at: SSAValue, memory: str = "local", layout: tuple[int, ...] | None = None,
                    split: tuple[int, int] | None = None) -> SSAValue:  # fmt: skip
        (buffer,) = self._step(et.CacheWriteOp(at, tensor, memory, layout, split=split))
        return buffer

    def double_buffer(self, buffer: SSAValue) -> None:
        """Double buffer the shared tile `buffer` (a `cache_read(..., "shared")` result) at
        its reduction loop (einc.transforms.double_buffer); inside `try_` where it may be
        refused."""
        self._step(et.DoubleBufferOp(buffer))

    def unswitch(self, h: SSAValue, max_versions: int | None = None) -> SSAValue:
        """`transform.einc.unswitch`: the loops' invariant guards hoisted (einc.passes.unswitch);
        the versions. Refused where a loop has none: inside `try_` where it may be."""
        (versions,) = self._step(et.UnswitchOp(h, max_versions))
        return versions

    def hoist_fill(self, buffer: SSAValue) -> None:
        """The constant fill of the staged `buffer` (a halo's frame) and the buffer moved
        before its staging loop (einc.transforms.hoist_fill); inside `try_` where it may be
        refused."""
        self._step(et.HoistFillOp(buffer))

    def pack_rows(self, buffer: SSAValue, loop: SSAValue) -> None:
        """Move the copy-in of the `cache_read` buffer `buffer` into `loop`, each iteration
        copying the rows of its window it reads first (einc.transforms.pack_rows); inside
        `try_` where it may be refused."""
        self._step(et.PackRowsOp(buffer, loop))

    def stream_stores(self, buffer: SSAValue) -> None:
        """Store the copy-out of the `cache_write` tile `buffer` non-temporally
        (einc.transforms.stream_stores); inside `try_` where it may be refused."""
        self._step(et.StreamStoresOp(buffer))
