"""Random schedules as transform scripts: every op of einc's transform dialect (docs/SCHEDULES.md).

`random_script(comp, rng)` grows a `transform.named_sequence @__transform_main` one step at a
time on a program's loops (a `Compilation` run to its "loops" stage): a step is a few lines
(fresh `match`es, sometimes a `knob`, one transform op, sometimes a second op on the first
one's result handles) drawn from the loops the steps before left; it is kept when the script
with it still applies (the driver's "scheduled" stage, the target's staging checks included)
and dropped when it is refused (a ScheduleError or TargetError, which must be located). Any
other exception propagates: a refused step must be a located refusal, never a crash.

The result is a legal script (text: a failing case is replayable from it, tests/regressions)
with the ops it kept and the ops it tried. WIDENINGS names the combinations that reached
defects (each now fixed); the CI suites use `SAFE` (scripts/explore.py uses `FULL`):
  rfactor_outermost   rfactor of a reduction loop no loop encloses (a rank-0 result's, or one
                      whose outer loop an unroll removed): ValueError "Operation insertion
                      point must have a parent block"
  rank0_unroll_device unroll in the nest of a rank-0 result on a device target
                      (`output0[] +=! input1[N]` unrolled: "value used before its definition")
  local_unroll_device a statement with a cache_read / cache_write and an unroll on a device
                      target (a rank-0 input cached local then unrolled gives -0.0 on OpenCL /
                      SYCL; `output0[M] = ... where M in 4` cached at M and unrolled by 4 gives
                      garbage on OpenCL, SYCL and HLSL; C is right)
  cache_staged        cache_read / cache_write of a staging buffer an earlier op made (an
                      rfactor inside a compute_at combined its partials outside the loop:
                      C source naming an undeclared `temp1_local`; tests/test_staged_buffers.py)
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects import affine, func, memref

from einc.compiler.driver import Compilation
from einc.errors import ScheduleError, TargetError
from einc.transforms import loop_transforms as lt
from einc.transforms.coalesce import coalesce_nest
from einc.transforms.distribute import pieces as distribute_pieces
from einc.transforms.gpu_mapping import perfect_chain
from einc.transforms.loop_analysis import accesses, buffer_name, carried_dependence, constant_bounds
from einc.transforms.ranges import max_trip_count

OPS = ("match", "knob", "tile", "peel", "reorder", "unroll", "parallelize", "vectorize", "bind",
       "vectorize_reduction", "reuse", "fuse", "cache_read", "cache_write", "rfactor", "compute_at",
       "reverse_compute_at", "split_conditions", "split_phases", "tensorize", "double_buffer", "distribute", "coalesce",
       "group_lanes", "rotate", "prefetch", "stream_stores", "unswitch", "pack_rows", "hoist_fill")  # fmt: skip
"""Every op of the dialect (einc/dialects/einc_transform.py EINC_TRANSFORM_OPS), short names."""

WIDENINGS = ("rfactor_outermost", "rank0_unroll_device", "local_unroll_device", "cache_staged")
FULL = frozenset(WIDENINGS)
SAFE: frozenset[str] = FULL
"""On in CI: every widening, their defects being fixed (rank-0 rfactor, unrolled rank-0
reductions, private buffers across unrolled loops on devices, staging buffers cached)."""


def widening() -> frozenset[str]:
    """The generator's widening for this run: FULL with EINC_SCHEDULE_WIDEN=full (exploration),
    else the names listed there (comma-separated), else SAFE (CI)."""
    given = os.environ.get("EINC_SCHEDULE_WIDEN", "")
    if given == "full":
        return FULL
    if not given:
        return SAFE
    return frozenset(w for w in given.split(",") if w in WIDENINGS)

# op -> weight of drawing it for a step (bind only on GPU targets)
WEIGHTS = {"tile": 6, "peel": 3, "reorder": 3, "unroll": 4, "parallelize": 2, "vectorize": 3,
           "vectorize_reduction": 3, "bind": 5, "fuse": 3, "cache_read": 4, "cache_write": 3,
           "rfactor": 3, "compute_at": 2, "reverse_compute_at": 2, "reuse": 2, "split_conditions": 2,
           "split_phases": 2, "distribute": 4}  # fmt: skip
LATE_WEIGHTS = {"coalesce": 0.08, "group_lanes": 0.05, "rotate": 0.06}
"""Ops drawn before the others, each with this probability per step, from a stream of their own."""
PREFETCH_WEIGHT = 0.3
"""How often a script ends with a prefetch (`_Gen.prefetch`, a stream of its own, like
tensorize's: a later op than LATE_WEIGHTS's, whose draws there would shift the others')."""
STREAM_WEIGHT = 0.5
"""How often a script with a kept cache_write ends with `stream_stores` of one of its tiles
(`_Gen.stream_stores`, a stream of its own)."""
HALO_WEIGHT = 0.3
PACK_ROWS_WEIGHT = 0.5
"""How often a script with a kept cache_read ends with `pack_rows` of one of its buffers at a
loop (`_Gen.pack_rows`, a stream of its own)."""
"""How often a script ends with a `cache_read ... halo` (`_Gen.halo`, a stream of its own)."""
HOIST_FILL_WEIGHT = 0.5
"""How often a script with a kept cache_read ends with `hoist_fill` of one of its buffers
(`_Gen.hoist_fill`, a stream of its own)."""
SPREAD_WEIGHT = 0.5
"""How often a drawn prefetch spreads its lines over a loop inside (`spread %s`)."""
EVENLY_WEIGHT = 0.3
"""How often a spread prefetch spreads its part evenly over every iteration down to the loop
(`spread %s evenly`: refused, located, where the part is not one run of the tensor)."""
INSIDE_WEIGHT = 0.4
"""How often a drawn split_conditions cuts inside its loop (`inside`)."""
UNSWITCH_WEIGHT = 0.35
"""How often a script ends with an `unswitch` (`_Gen.unswitch`, a stream of its own): of a
loop with a guard to hoist where there is one, else of a register tile the step makes."""
INNER = ("vectorize", "vectorize_reduction", "rfactor", "unroll")
"""Ops drawn mostly on innermost loops."""
SKETCH_START = 0.3
"""How often a device script starts from the default policy's schedule or a `tile` sketch
(`_Gen.sketch_start`) before its random steps."""
BIND_AXES = ("block.x", "block.y", "block.z", "thread.x", "thread.y", "thread.z")
SIZES = (1, 2, 3, 4, 5, 7, 8, 16)


def header(lines: list[str]) -> str:
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        f"{body}\n  }}\n}}\n"
    )


@dataclass
class Draft:
    """A random script: its lines, the ops of the steps kept, every op a step tried, and the
    refusals met (each a located EincError's rendering's first line)."""

    lines: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    tried: set[str] = field(default_factory=set)
    refusals: list[str] = field(default_factory=list)
    failed: str | None = None  # the script whose application raised something else

    @property
    def text(self) -> str:
        return header(self.lines)


@dataclass(frozen=True)
class Loop:
    stmt: str
    axis: str
    init: bool
    trip: int | None
    innermost: bool
    top: bool


def _tag(op: affine.ForOp, name: str) -> str | None:
    attr = op.attributes.get(name)
    return getattr(attr, "data", None) if attr is not None else None


def loops_of(module: Any) -> list[Loop]:
    """The tagged loops of the host functions (copy loops of staging buffers left out)."""
    found = []
    for f in module.walk():
        if not isinstance(f, func.FuncOp) or not f.body.blocks:
            continue
        for op in f.body.walk():
            if not isinstance(op, affine.ForOp) or "einc.copy" in op.attributes:
                continue
            stmt, axis = _tag(op, lt.STMT_ATTR), _tag(op, lt.AXIS_ATTR)
            if stmt is None or axis is None:
                continue
            bounds = constant_bounds(op)
            trip = None if bounds is None else max(0, bounds[1] - bounds[0])
            inner = not any(isinstance(o, affine.ForOp) for o in op.body.walk())
            found.append(Loop(stmt, axis, "einc.init" in op.attributes, trip, inner, op.parent_op() is f))
    return found


def ranks(module: Any) -> dict[str, int]:
    """The rank of every named tensor the loops load or store."""
    out: dict[str, int] = {}
    for op in module.walk():
        if isinstance(op, (affine.LoadOp, affine.StoreOp, memref.LoadOp, memref.StoreOp)):
            buf = op.memref
            out.setdefault(buffer_name(buf), len(buf.type.get_shape()))  # type: ignore[attr-defined]
    return out


def reads(module: Any) -> dict[str, set[str]]:
    """Per statement: the tensors its nests (not its fills) read."""
    out: dict[str, set[str]] = {}
    for op in module.walk():
        if isinstance(op, affine.LoadOp):
            loop = op.parent_op()
            while loop is not None and not (isinstance(loop, affine.ForOp) and _tag(loop, lt.STMT_ATTR)):
                loop = loop.parent_op()
            if loop is not None and "einc.init" not in loop.attributes:
                out.setdefault(_tag(loop, lt.STMT_ATTR) or "", set()).add(buffer_name(op.memref))
    return out


def siblings(module: Any, unique: list[Loop]) -> list[tuple[Loop, Loop]]:
    """Pairs of tagged innermost loops in one block (of `unique`: each matched alone)."""
    by_tag: dict[tuple[str | None, str | None, bool], Loop] = {
        (lp.stmt, lp.axis, lp.init): lp for lp in unique if lp.innermost
    }
    pairs = []
    for op in module.walk():
        if not isinstance(op, affine.ForOp):
            continue
        inner = [by_tag.get((_tag(c, lt.STMT_ATTR), _tag(c, lt.AXIS_ATTR), "einc.init" in c.attributes))
                 for c in op.body.block.ops if isinstance(c, affine.ForOp)]  # fmt: skip
        known = [lp for lp in inner if lp is not None]
        pairs += [(a, b) for i, a in enumerate(known) for b in known[i + 1:]]
    return pairs


def _find(module: Any, loop: Loop) -> affine.ForOp | None:
    for op in module.walk():
        if (isinstance(op, affine.ForOp) and _tag(op, lt.STMT_ATTR) == loop.stmt
                and _tag(op, lt.AXIS_ATTR) == loop.axis and ("einc.init" in op.attributes) == loop.init):  # fmt: skip
            return op
    return None


class _Gen:
    def __init__(self, comp: Compilation, rng: random.Random, widen: frozenset[str]):
        self.comp, self.rng, self.widen = comp, rng, widen
        # ops added later draw from their own stream: the scripts of the other ops stay those
        # of the same seed before (the generator's coverage test keeps its seeds)
        self.late = random.Random(hash(rng.getstate()[1]))  # the state words: hash(None) varies by run on 3.11
        self.variants = random.Random(hash(rng.getstate()[1]) + 1)  # sketch_start's reductions and rows
        self.device = comp.target != "c"
        self.loops_module = comp.run_until("loops")
        self.ranks = ranks(self.loops_module)
        self.current = self.loops_module
        self.n = 0
        self.knobs = 0
        self.draft = Draft()
        self.cached: set[str] = set()  # statements with a cache op kept
        self.unrolled: set[str] = set()  # statements with an unroll kept
        self.marks: list[tuple[set[str], str]] = []  # of the step being drawn

    # -- lines --
    def handle(self) -> str:
        self.n += 1
        return f"%h{self.n}"

    def match(self, loop: Loop, lines: list[str]) -> str:
        h = self.handle()
        init = " init" if loop.init else ""
        lines.append(f'{h} = transform.einc.match stmt "{loop.stmt}" axis "{loop.axis}"{init} in %root')
        return h

    def _band(self, loop: Loop, lines: list[str], rng: random.Random, shuffle: bool) -> tuple[list[str], list[str]] | None:
        """Two or more consecutive loops of the perfect chain below `loop`, matched (in a
        random order when `shuffle`), and a result handle for each; None: no such band."""
        top = _find(self.current, loop)
        band = perfect_chain(top) if top is not None else []
        tags = [(_tag(b, lt.STMT_ATTR), _tag(b, lt.AXIS_ATTR), "einc.init" in b.attributes) for b in band]
        if len(tags) < 2:
            return None
        start = rng.randrange(len(tags) - 1)
        part = tags[start:start + rng.randint(2, len(tags) - start)]
        if shuffle:
            rng.shuffle(part)
        hs = [self.match(Loop(s or "", a or "", ini, None, False, False), lines) for s, a, ini in part]
        return hs, [self.handle() for _ in hs]

    def size(self, options: list[int], lines: list[str]) -> str:
        value = self.rng.choice(options)
        if self.rng.random() < 0.15:
            self.knobs += 1
            values = sorted({value, *self.rng.sample(options, min(2, len(options)))})
            lines.append(f'%k{self.knobs} = transform.einc.knob "k{self.knobs}" = {value} from {values}')
            return f"%k{self.knobs}"
        return str(value)

    def rank0(self, stmt: str) -> bool:
        return self.ranks.get(stmt, 1) == 0

    def may_unroll(self, stmt: str) -> bool:
        if not self.device:
            return True
        if self.rank0(stmt) and "rank0_unroll_device" not in self.widen:
            return False
        if stmt in self.cached and "local_unroll_device" not in self.widen:
            return False
        self.marks.append((self.unrolled, stmt))
        return True

    # -- one step --
    def step(self) -> tuple[str, list[str]] | None:
        loops = loops_of(self.current)
        if not loops:
            return None
        weights = dict(WEIGHTS)
        if not self.device:
            weights["bind"] = 0
        late = [k for k, w in LATE_WEIGHTS.items() if self.late.random() < w]
        kind = late[0] if late else self.rng.choices(list(weights), list(weights.values()))[0]
        inner = [lp for lp in loops if lp.innermost]
        loop = self.rng.choice(inner if kind in INNER and inner and self.rng.random() < 0.8 else loops)
        lines: list[str] = []
        rng = self.rng
        trip = loop.trip or 1
        if kind == "tile":
            h = self.match(loop, lines)
            size = self.size([s for s in SIZES if s <= max(trip, 2)] + [trip], lines)
            o, i = self.handle(), self.handle()
            lines.append(f"{o}, {i} = transform.einc.tile {h} by {size}")
            follow = rng.random()
            if follow < 0.2 and self.may_unroll(loop.stmt):
                lines.append(f"{self.handle()} = transform.einc.unroll {i} by {rng.choice([2, 4, 8])}")
            elif follow < 0.35:
                lines.append(f"transform.einc.vectorize {i}")
            elif follow < 0.5 and self.device:
                lines.append(f'transform.einc.bind {o} to "block.x"')
                lines.append(f'transform.einc.bind {i} to "thread.x"')
                inside = self._reduction_tiles(_find(self.current, loop))
                if inside and rng.random() < 0.5:  # a double-buffered shared tile of a reduction inside
                    staged, tensor = rng.choice(inside)
                    at, buffer = self.match(staged, lines), self.handle()
                    lines.append(f'{buffer} = transform.einc.cache_read "{tensor}" at {at} in "shared"')
                    lines.append(f"transform.einc.double_buffer {buffer}")
        elif kind == "peel":
            h = self.match(loop, lines)
            size = self.size(sorted({1, 2, 3, 4, max(1, trip - 1), trip}), lines)
            main, rest = self.handle(), self.handle()
            lines.append(f"{main}, {rest} = transform.einc.peel {h} by {size}")
        elif kind == "split_conditions":
            h = self.match(loop, lines)
            pieces = self.handle()
            # some cut inside the loop (its pieces as branches of its body), from a generator of
            # its own so the other draws stay
            inside = random.Random(hash(rng.getstate()[1]) + 5).random() < INSIDE_WEIGHT
            lines.append(f"{pieces} = transform.einc.split_conditions {h}{' inside' if inside else ''}")
            if rng.random() < 0.3 and loop.innermost:
                lines.append(f"transform.einc.vectorize {pieces}")
        elif kind == "split_phases":
            h = self.match(loop, lines)
            phases = self.handle()
            lines.append(f"{phases} = transform.einc.split_phases {h} by {self.size([2, 3, 4], lines)}")
            if rng.random() < 0.3 and loop.innermost:
                lines.append(f"transform.einc.vectorize {phases}")
            found = _find(self.current, loop)
            parent = found.parent_op() if found is not None else None
            if rng.random() < 0.5 and isinstance(parent, affine.ForOp) and _tag(parent, lt.STMT_ATTR) and _tag(parent, lt.AXIS_ATTR):
                # each phase a nest of its own (phase_nests): the loop above distributed,
                # into as many pieces as the phases its body then holds (a refusal otherwise)
                p = self.match(Loop(_tag(parent, lt.STMT_ATTR) or "", _tag(parent, lt.AXIS_ATTR) or "",
                                    "einc.init" in parent.attributes, None, False, False), lines)  # fmt: skip
                count = min(max(1, trip), rng.choice([2, 3, 4]))
                lines.append(f"{', '.join(self.handle() for _ in range(count))} = transform.einc.distribute {p} into {count}")
        elif kind == "coalesce":
            # a perfect nest of two or more loops from here down (the whole nest, or part)
            nests = [lp for lp in loops if (op := _find(self.current, lp)) is not None and len(coalesce_nest(op)) > 1]
            if nests and rng.random() < 0.9:
                loop = rng.choice(nests)
            found = _find(self.current, loop)
            depth = len(coalesce_nest(found)) if found is not None else 1
            h = self.match(loop, lines)
            c = self.handle()
            lines.append(f"{c} = transform.einc.coalesce {h} by {self.size(sorted({2, depth, rng.randint(1, max(depth, 1))}), lines)}")
            follow = rng.random()
            if follow < 0.3:
                o, i = self.handle(), self.handle()
                lines.append(f"{o}, {i} = transform.einc.tile {c} by {self.size([s for s in SIZES if s <= 16], lines)}")
            elif follow < 0.5:
                lines.append(f"transform.einc.vectorize {c}")
            elif follow < 0.6:
                lines.append(f"transform.einc.parallelize {c}")
        elif kind == "group_lanes":
            # a loop over one loop (a refusal otherwise): tiled by a group count, its tile
            # merged with the child; the merged loop vectorized now and then (runs of lanes)
            h = self.match(loop, lines)
            o, merged = self.handle(), self.handle()
            lines.append(f"{o}, {merged} = transform.einc.group_lanes {h} by {self.size([2, 3, 4, trip], lines)}")
            found = _find(self.current, loop)
            body = [op for op in found.body.block.ops if not isinstance(op, affine.YieldOp)] if found is not None else []
            if rng.random() < 0.4 and len(body) == 1 and isinstance(body[0], affine.ForOp) and not any(
                    isinstance(op, affine.ForOp) for op in body[0].body.walk()):
                lines.append(f"transform.einc.vectorize {merged}")
        elif kind == "distribute":
            spread = [lp for lp in loops if (op := _find(self.current, lp)) is not None and len(distribute_pieces(op)) > 1]
            if spread and rng.random() < 0.8:
                loop = rng.choice(spread)
            found = _find(self.current, loop)
            count = max(1, len(distribute_pieces(found))) if found is not None else 1
            h = self.match(loop, lines)
            lines.append(f"{', '.join(self.handle() for _ in range(count))} = transform.einc.distribute {h} into {count}")
        elif kind == "unroll":
            if not self.may_unroll(loop.stmt):
                return None
            h = self.match(loop, lines)
            size = self.size(sorted({2, 3, 4, trip}), lines)
            lines.append(f"{self.handle()} = transform.einc.unroll {h} by {size}")
        elif kind == "reorder":
            picked = self._band(loop, lines, rng, shuffle=True)
            if picked is None:
                return None
            hs, outs = picked
            lines.append(f"{', '.join(outs)} = transform.einc.reorder {', '.join(hs)}")
        elif kind == "rotate":
            # two or more consecutive loops of a perfect chain (a reduction's loops too),
            # rotated by a size: the reduction's order changed where it reassociates
            picked = self._band(loop, lines, rng, shuffle=False)
            if picked is None:
                return None
            hs, outs = picked
            by = self.size(list(range(len(hs))), lines)
            lines.append(f"{', '.join(outs)} = transform.einc.rotate {', '.join(hs)} by {by}")
        elif kind in ("parallelize", "vectorize", "vectorize_reduction"):
            h = self.match(loop, lines)
            lines.append(f"transform.einc.{kind} {h}")
        elif kind == "bind":
            h = self.match(loop, lines)
            axis = rng.choice(BIND_AXES)
            limit = f" max_threads {rng.choice([4, 8, 64, 256])}" if rng.random() < 0.3 else ""
            lines.append(f'transform.einc.bind {h} to "{axis}"{limit}')
        elif kind == "rfactor":
            if loop.top and "rfactor_outermost" not in self.widen:
                return None
            divisors = [d for d in range(2, trip + 1) if trip % d == 0] or [2]
            h = self.match(loop, lines)
            p, c = self.handle(), self.handle()
            lines.append(f"{p}, {c} = transform.einc.rfactor {h} by {self.size(divisors, lines)}")
        elif kind in ("cache_read", "cache_write"):
            top = _find(self.current, loop)
            if top is None:
                return None
            names = sorted({buffer_name(a.buffer) for a in accesses(top)})
            if "cache_staged" not in self.widen:  # the program's tensors only
                names = [n for n in names if n in self.ranks]
            if kind == "cache_write":
                names = [n for n in names if n == loop.stmt] or names
            if not names:
                return None
            tensor = rng.choice(names)
            memory = rng.choice(["", ' in "local"', ' in "shared"'] if self.device else ["", ' in "local"'])
            if self.device and loop.stmt in self.unrolled and "local_unroll_device" not in self.widen:
                return None
            double = kind == "cache_read" and rng.random() < (0.5 if "shared" in memory else 0.1)
            if double and "shared" in memory:  # a reduction's tile loop inside bound loops, if any
                tiles = self._reduction_tiles()
                if tiles:
                    loop, tensor = rng.choice(tiles)
            self.marks.append((self.cached, loop.stmt))
            h = self.match(loop, lines)
            buffer = self.handle()
            lines.append(f'{buffer} = transform.einc.{kind} "{tensor}" at {h}{memory}')
            if double:  # refused but for a shared tile at a reduction loop
                lines.append(f"transform.einc.double_buffer {buffer}")
        elif kind in ("fuse", "compute_at", "reverse_compute_at", "reuse"):
            unique = [lp for lp in loops if loops.count(lp) == 1]  # a handle of one loop
            order = list(dict.fromkeys(lp.stmt for lp in loops))  # statements in program order
            tops = [lp for lp in unique if lp.top]
            if kind == "fuse":
                pair = self._pair(tops, lambda a, b: True)
            elif kind == "reuse":  # sibling innermost loops (after a fuse), else any two
                pair = self._pair([], lambda a, b: False, siblings(self.current, unique)) if rng.random() < 0.8 else None
                pair = pair or self._pair([lp for lp in unique if lp.innermost], lambda a, b: True)
            else:
                read = reads(self.current)
                later = [(p, c) for p in tops if not p.init for c in unique
                         if order.index(c.stmt) > order.index(p.stmt) and p.stmt in read.get(c.stmt, ())]  # fmt: skip
                if kind == "compute_at":  # a producer's nest, at a loop of a statement reading it
                    pair = self._pair([], lambda a, b: False, later)
                else:  # a consumer's nest reading an earlier statement, at a loop of that one
                    pair = self._pair([], lambda a, b: False, [
                        (c, p) for c in tops if not c.init for p in unique
                        if order.index(p.stmt) < order.index(c.stmt) and p.stmt in read.get(c.stmt, ())])  # fmt: skip
            if pair is None:
                return None
            h1, h2 = self.match(pair[0], lines), self.match(pair[1], lines)
            if kind == "fuse":
                lines.append(f"{self.handle()} = transform.einc.fuse {h1} into {h2}")
                inner = [self._child(lp, unique) for lp in pair]
                if rng.random() < 0.5 and inner[0] is not None and inner[1] is not None:
                    r1, r2 = self.match(inner[0], lines), self.match(inner[1], lines)
                    lines.append(f"transform.einc.reuse {r1} in {r2}")  # the fused nests' inner loops
            elif kind == "reuse":
                lines.append(f"transform.einc.reuse {h1} in {h2}")
            else:
                lines.append(f"transform.einc.{kind} {h1} at {h2}")
        return kind, lines

    def _reduction_tiles(self, within: Any = None) -> list[tuple[Loop, str]]:
        """(loop, tensor it reads) for the unbound loops carrying a dependence (a reduction's)
        inside a bound loop (`within`: inside that loop, to be bound), with no bound loop
        inside: where a shared tile can be double buffered."""
        found = []
        for op in (within.body.walk() if within is not None else self.current.walk()):
            if not isinstance(op, affine.ForOp) or "einc.copy" in op.attributes or lt.BIND_ATTR in op.attributes:
                continue
            stmt, axis = _tag(op, lt.STMT_ATTR), _tag(op, lt.AXIS_ATTR)
            parent, bound = op.parent_op(), within is not None
            while parent is not None and not bound:
                bound = lt.BIND_ATTR in parent.attributes
                parent = parent.parent_op()
            if stmt is None or axis is None or not bound or carried_dependence(op) is None:
                continue
            if any(isinstance(o, affine.ForOp) and lt.BIND_ATTR in o.attributes for o in op.body.walk()):
                continue
            inside = accesses(op)
            written = {buffer_name(a.buffer) for a in inside if a.write}
            read = sorted({buffer_name(a.buffer) for a in inside} & set(self.ranks) - written)
            loop = Loop(stmt, axis, "einc.init" in op.attributes, None, False, False)
            found += [(loop, t) for t in read]
        return found

    def _child(self, loop: Loop, unique: list[Loop]) -> Loop | None:
        """The innermost loop directly inside `loop` (one of `unique`), if any."""
        op = _find(self.current, loop)
        kids = [c for c in op.body.block.ops if isinstance(c, affine.ForOp)] if op is not None else []
        for lp in unique:
            if kids and lp.innermost and _find(self.current, lp) is kids[0]:
                return lp
        return None

    def _pair(self, pool: list[Loop], ok: Any, pairs: list[tuple[Loop, Loop]] | None = None
              ) -> tuple[Loop, Loop] | None:  # fmt: skip
        """Two loops of `pool` in program order (or one of `pairs`)."""
        if pairs is None:
            pairs = [(a, b) for i, a in enumerate(pool) for b in pool[i + 1:] if ok(a, b)]
        return self.rng.choice(pairs) if pairs else None

    def sketch_start(self) -> None:
        """Start the script from the device default policy's schedule or one of its `tile`
        sketches (einc/schedule/policies/gpu.py; the inputs staged in shared memory drawn:
        the policy's choice, none, all or one; the other reductions the policy's, cross-thread
        with the rows a work-group holds a knob, or private) with every knob drawn among its options; the
        random steps then go on from it. Dropped (a refusal) when it does not apply."""
        from einc.schedule.policies import gpu
        from einc.targets import get_target

        rng = self.rng
        inputs = sorted(t.name for t in self.comp.program.inputs)
        staging = rng.choice([None, frozenset(), frozenset(inputs), frozenset(rng.sample(inputs, min(1, len(inputs))))])
        # the reductions as the policy makes them, cross-thread with a knob of the rows a
        # work-group holds (the `tile.cross` sketch), or one output per work-item
        variant = self.variants.choice([None, gpu.Variant(reductions="cross", rows_knob=True), gpu.Variant(reductions="private")])
        schedule = gpu.build(get_target(self.comp.target), self.loops_module, staging, variant=variant)
        if schedule is None:
            return
        values = {k: (self.variants if k.endswith(".rows") else rng).choice(v.options) for k, v in schedule.knobs().items()}
        printed = str(schedule.with_values(values)).splitlines()
        body = printed[printed.index(next(ln for ln in printed if "@__transform_main" in ln)) + 1:]
        lines = [re.sub(r"%(\d+)\b", lambda m: "%root" if m.group(1) == "0" else f"%s{m.group(1)}", ln.strip())
                 for ln in body if ln.strip() and "transform.yield" not in ln and ln.strip() != "}"]  # fmt: skip
        ops = [m for ln in lines for m in re.findall(r"transform\.einc\.(\w+)", ln)]
        self.draft.tried.update(ops)
        try:
            self.current = scheduled(self.comp, header(lines))
        except (ScheduleError, TargetError) as err:
            self.draft.refusals.append(err.render().splitlines()[0])
            return
        except BaseException:
            self.draft.failed = header(lines)
            raise
        self.draft.lines = lines
        self.draft.kept += [op for op in ops if op not in ("match", "knob")]
        # (conservatively) every statement cached and unrolled, for `may_unroll`
        if "cache_read" in ops or "cache_write" in ops:
            self.cached.update(gpu_stmts(self.loops_module))
        if "unroll" in ops:
            self.unrolled.update(gpu_stmts(self.loops_module))

    def grow(self, steps: int) -> Draft:
        if self.device and self.rng.random() < SKETCH_START:
            self.sketch_start()
        for _ in range(steps):
            self.marks = []
            made = self.step()
            if made is None:
                continue
            self.attempt(made[1])
        self.prefetch()
        self.stream_stores()
        self.halo()
        self.pack_rows()
        self.hoist_fill()
        self.tensorize()
        self.unswitch()
        return self.draft

    def attempt(self, lines: list[str]) -> None:
        """Append `lines` to the draft if the target takes the script, else note the refusal."""
        ops = [m for ln in lines for m in re.findall(r"transform\.einc\.(\w+)", ln)]
        self.draft.tried.update(ops)
        candidate = self.draft.lines + lines
        try:
            self.current = scheduled(self.comp, header(candidate))
        except (ScheduleError, TargetError) as err:
            self.draft.refusals.append(err.render().splitlines()[0])
            return
        except BaseException:
            self.draft.failed = header(candidate)
            raise
        self.draft.lines = candidate
        for marked, stmt in self.marks:
            marked.add(stmt)
        self.draft.kept += [op for op in ops if op not in ("match", "knob")]

    def _tail_pick(self, side: random.Random, weight: float) -> tuple[Loop, list[str]] | None:
        """For an op drawn at the end of some scripts from its own generator `side` (with
        probability `weight`): a loop of the scheduled program and the program's tensors its
        nest reads or writes, or None."""
        loops = loops_of(self.current)
        if not loops or side.random() > weight:
            return None
        loop = side.choice(loops)
        top = _find(self.current, loop)
        names = sorted({buffer_name(a.buffer) for a in accesses(top)} & set(self.ranks)) if top is not None else []
        return (loop, names) if names else None

    def prefetch(self) -> None:
        """A prefetch of a tensor a loop reads, its next tile a distance ahead, after the
        random steps of some scripts (refused where the tile does not move with the loop),
        drawn from a generator of its own so that the other ops' draws, and the generator's
        coverage over its fixed seeds, stay as they were."""
        side = random.Random(hash(self.rng.getstate()[1]) + 1)
        picked = self._tail_pick(side, PREFETCH_WEIGHT)
        if picked is None:
            return
        loop, names = picked
        self.marks = []
        lines: list[str] = []
        h = self.match(loop, lines)
        line = f'{self.handle()} = transform.einc.prefetch "{side.choice(names)}" at {h} by {side.choice([1, 1, 2, 3])}'
        # drawn after the tensor and the distance, so those stay what they were: some spread
        # over a loop inside (a slice of the next tile per iteration of it; refused where the
        # tile does not split along it)
        top = _find(self.current, loop)
        every = [op for op in self.current.walk() if isinstance(op, affine.ForOp)]
        key = lambda op: (_tag(op, lt.STMT_ATTR), _tag(op, lt.AXIS_ATTR), "einc.init" in op.attributes)  # noqa: E731
        # loops inside that a match names alone, constant bounds and step 1 (what spread takes)
        inner = [op for op in top.walk() if isinstance(op, affine.ForOp) and op is not top and all(key(op)[:2])
                 and sum(key(o) == key(op) for o in every) == 1 and constant_bounds(op) is not None
                 and op.step.value.data == 1] if top is not None else []  # fmt: skip
        if inner and side.random() < SPREAD_WEIGHT:
            pick = side.choice(inner)
            s = self.handle()
            init = " init" if "einc.init" in pick.attributes else ""
            lines.append(f'{s} = transform.einc.match stmt "{_tag(pick, lt.STMT_ATTR)}" axis "{_tag(pick, lt.AXIS_ATTR)}"{init} in %root')
            line += f" spread {s}"
            if side.random() < EVENLY_WEIGHT:  # drawn last: the draws before stay what they were
                line += " evenly"
        lines.append(line)
        self.attempt(lines)

    def stream_stores(self) -> None:
        """Non-temporal copy-out stores of a tile a kept `cache_write` made, after the random
        steps of some scripts: refused (located) where the handle was replaced since, the
        copy-out is no whole vector store or the output is read back. Drawn from a generator
        of its own, as `prefetch`, so the other draws stay."""
        side = random.Random(hash(self.rng.getstate()[1]) + 3)
        tiles = [m.group(1) for ln in self.draft.lines for m in [re.match(r"(%\w+) = transform\.einc\.cache_write ", ln)] if m]
        if not tiles or side.random() > STREAM_WEIGHT:
            return
        self.marks = []
        self.attempt([f"transform.einc.stream_stores {side.choice(tiles)}"])

    def halo(self) -> None:
        """A local staging of a tensor with its halo (`cache_read ... halo`) after the random
        steps of some scripts: refused at its keyword where no read of the tensor inside the
        loop is guarded by its bounds alone (most programs), else the padded reads lose their
        guards. Drawn from a generator of its own, as `prefetch`, so the other draws stay."""
        side = random.Random(hash(self.rng.getstate()[1]) + 2)
        picked = self._tail_pick(side, HALO_WEIGHT)
        if picked is None:
            return
        loop, names = picked
        self.marks = [(self.cached, loop.stmt)]
        lines: list[str] = []
        h = self.match(loop, lines)
        memory = side.choice(["", ' in "local"'])
        lines.append(f'{self.handle()} = transform.einc.cache_read "{side.choice(names)}" at {h}{memory} halo')
        self.attempt(lines)

    def pack_rows(self) -> None:
        """A kept `cache_read` buffer's copy-in moved into a random loop, one window's new
        rows an iteration, after the random steps of some scripts: refused (located) where
        the loop is not beside the copy-in or the buffer's reads do not slide with it. Drawn
        from a generator of its own, as `prefetch`, so the other draws stay."""
        side = random.Random(hash(self.rng.getstate()[1]) + 4)
        staged = [m.group(1) for ln in self.draft.lines for m in [re.match(r"(%\w+) = transform\.einc\.cache_read ", ln)] if m]
        loops = loops_of(self.current)
        if not staged or not loops or side.random() > PACK_ROWS_WEIGHT:
            return
        self.marks = []
        lines: list[str] = []
        h = self.match(side.choice(loops), lines)
        lines.append(f"transform.einc.pack_rows {side.choice(staged)} at {h}")
        self.attempt(lines)

    def hoist_fill(self) -> None:
        """A kept `cache_read` buffer's constant fill moved before its staging loop, after the
        random steps of some scripts: refused (located) where the buffer has no constant fill
        (no halo: most scripts), its loop runs in parallel or a store may meet the fill. Drawn
        from a generator of its own, as `prefetch`, so the other draws stay."""
        side = random.Random(hash(self.rng.getstate()[1]) + 5)
        staged = [m.group(1) for ln in self.draft.lines for m in [re.match(r"(%\w+) = transform\.einc\.cache_read ", ln)] if m]
        if not staged or side.random() > HOIST_FILL_WEIGHT:
            return
        self.marks = []
        self.attempt([f"transform.einc.hoist_fill {side.choice(staged)}"])

    def tensorize(self) -> None:
        """A tensorize at the end of some scripts, drawn from a generator of its own so the
        other draws stay as they were: the programs are float32, so the op is refused at its
        location (no tensor cores on the target, or not a float16/bfloat16 contraction)."""
        side = random.Random(hash(self.rng.getstate()[1]))
        loops = loops_of(self.current)
        if not loops or side.random() > 0.2:
            return
        self.marks = []
        lines: list[str] = []
        h = self.match(side.choice(loops), lines)
        intrinsic = "mfma.16x16x16" if self.comp.target == "hip" else "mma.m16n8k16"
        lines.append(f'{self.handle()} = transform.einc.tensorize {h} "{intrinsic}"')
        self.attempt(lines)


    def unswitch(self) -> None:
        """An `unswitch` at the end of some scripts, drawn from a generator of its own so the
        other draws stay as they were: of a loop with a guard it can hoist (an unrolled
        partial tile's, inside a loop between the tile loops) where the scheduled program
        has one; else a register tile made for it (a loop A over a loop B: A tiled by a size
        that does not divide it, B moved between A.o and A.i, A.i unrolled completely under
        guards, B unswitched), or, where there is none to make, of any loop (refused at the
        op: nothing to hoist)."""
        from einc.passes.unswitch import invariant_guards

        side = random.Random(hash(self.rng.getstate()[1]) + 4)
        loops = loops_of(self.current)
        if not loops or side.random() > UNSWITCH_WEIGHT:
            return
        self.marks = []
        lines: list[str] = []
        limit = side.choice(["", "", " {max_versions = 2}", " {max_versions = 3}"])
        guarded = [lp for lp in loops if (op := _find(self.current, lp)) is not None and invariant_guards(op)]
        tiles = [] if guarded else self._register_tiles(loops)
        if guarded:
            target = self.match(side.choice(guarded), lines)
        elif tiles and side.random() < 0.8:
            a, b, size = side.choice(tiles)
            if not self.may_unroll(a.stmt):
                return
            ha, hb = self.match(a, lines), self.match(b, lines)
            o, i = self.handle(), self.handle()
            lines.append(f"{o}, {i} = transform.einc.tile {ha} by {size}")
            o2, target, i2 = self.handle(), self.handle(), self.handle()
            lines.append(f"{o2}, {target}, {i2} = transform.einc.reorder {o}, {hb}, {i}")
            lines.append(f"{self.handle()} = transform.einc.unroll {i2} by {size}")
        else:
            target = self.match(side.choice(loops), lines)
        versions = self.handle()
        lines.append(f"{versions} = transform.einc.unswitch {target}{limit}")
        self.attempt(lines)

    def _register_tiles(self, loops: list[Loop]) -> list[tuple[Loop, Loop, int]]:
        """(A, B, size) for each loop A of constant bounds and more than 2 iterations whose
        body is one loop B, and the sizes up to 8 that do not divide A's trip count."""
        found = []
        for a in loops:
            op = _find(self.current, a)
            trip = max_trip_count(op) if op is not None and constant_bounds(op) is not None else None
            if op is None or trip is None or trip <= 2:
                continue
            kids = [c for c in op.body.block.ops if isinstance(c, affine.ForOp)]
            if len(kids) != 1 or len(list(op.body.block.ops)) != 2:
                continue
            child = kids[0]
            stmt, axis = _tag(child, lt.STMT_ATTR), _tag(child, lt.AXIS_ATTR)
            if stmt is None or axis is None:
                continue
            b = Loop(stmt, axis, "einc.init" in child.attributes, None, False, False)
            found += [(a, b, s) for s in range(2, min(trip, 9)) if trip % s]
        return found


def gpu_stmts(module: Any) -> set[str]:
    """The statements with loops in a loop module (the sketch may cache and unroll any)."""
    return {s for lp in loops_of(module) if (s := lp.stmt)}


def scheduled(base: Compilation, text: str) -> Any:
    """`base`'s loops with the script `text` applied as the driver's "scheduled" stage does
    (for `base.target`, its staging checks included)."""
    comp = Compilation(base.source, base.filename, base.input_dict, base.extra_outputs, base.target, text)
    comp.results["ein"] = base.results["ein"]
    comp.program = base.program
    comp.results["loops"] = base.results["loops"]
    return comp.run_until("scheduled")


def random_script(comp: Compilation, rng: random.Random, steps: int | None = None,
                  widen: frozenset[str] = SAFE) -> Draft:  # fmt: skip
    """A random legal script for `comp`'s program and target (see the module docstring)."""
    return _Gen(comp, rng, widen).grow(steps if steps is not None else rng.randint(1, 8))


def script_case(prog: Any, seed: int, target: str, widen: frozenset[str] | None = None,
                steps: int | None = None) -> tuple[Any, Draft | None]:  # fmt: skip
    """A case (tests/oracle/corpus.py) of the generated program `prog` on `target` with a
    random legal script grown from `seed` (None when the program has no loops to schedule or
    the target refuses it by design: the case then has the target's default schedule).
    Raises what the generator raises (see `_Gen.grow`)."""
    from tests.oracle.corpus import REFUSED_BY_DESIGN, genprog_case, located

    text, input_dict, extra = prog.compile_args()
    comp = Compilation(text, "<program>", input_dict, extra, target, "none")
    try:
        comp.run_until("loops")
    except TargetError as err:
        located(err)
        if not REFUSED_BY_DESIGN.search(err.message):
            raise
        return genprog_case(prog, target, None, seed, "random script"), None
    gen = _Gen(comp, random.Random(seed), widening() if widen is None else widen)
    try:
        draft = gen.grow(steps if steps is not None else gen.rng.randint(1, 8))
    except BaseException as err:
        from tests.oracle.corpus import _count, record_failure

        _count("internal")
        record_failure(genprog_case(prog, target, gen.draft.failed, seed, "random script"), err)
        raise
    for refusal in draft.refusals:
        assert not refusal.startswith("einc: error:"), f"refusal without a location: {refusal}"
    return genprog_case(prog, target, draft.text, seed, "random script"), draft
