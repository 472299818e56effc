"""The executor: a module's host function run as one lane, each `egpu.launch` as every
work-item of the kernel at once (lanes in lock-step, masked where control flow diverges).

Control flow: an `scf.if` whose condition differs between lanes runs both regions, each
under its lanes' mask, and merges the results per lane; a loop whose bounds differ runs to
the largest trip count, each lane masked off after its own. A barrier checks that every
work-item of each block reaches it together (all active or none) and starts a new epoch of
the race detector (memory.py); `egpu.subgroup_reduce` checks its clusters likewise and
combines them as the warp shuffles do (a butterfly over lane ids `l ^ offset`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import affine, func, scf
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from einc.dialects import egpu
from einc.semantics.egpu import values as V
from einc.semantics.egpu.expand import Nest, independent_prefix, run_expanded
from einc.semantics.egpu.memory import Buffer, DataRace, Grid, KernelFault, Window
from einc.semantics.egpu.ops import COMPILERS
from einc.semantics.egpu.state import Step, merge
from einc.semantics.egpu.values import Lanes, UnsupportedIR, dtype_of, lanes
from einc.ir.attrs import NAME_ATTR

class Machine:
    """Runs one module. Each block is compiled once into a list of steps (closures over the
    slots of their operands and results in `env`), run for the lanes of a mask."""

    def __init__(self, module: ModuleOp, subgroup_size: int | None):
        self.module = module
        self.subgroup_size = subgroup_size
        self.env: list[object] = []
        self.slots: dict[SSAValue, int] = {}
        self.code: dict[Block, tuple[list[int], list[Step], list[int]]] = {}
        self.grid = Grid(None)
        self.launches = 0
        self.point_loop: tuple[Operation, np.ndarray, np.ndarray] | None = None
        self.kernels = {k.sym_name.data: k for k in module.ops if isinstance(k, egpu.FuncOp)}
        self.host_block: Block | None = None
        self.host_buffers: list[Buffer] = []
        self.nests: dict[Operation, list[affine.ForOp]] = {}
        self.expandable: dict[Operation, Nest | None] = {}

    # ---- values ------------------------------------------------------------------------------

    def slot(self, v: SSAValue) -> int:
        s = self.slots.get(v)
        if s is None:
            s = self.slots[v] = len(self.env)
            self.env.append(None)
        return s

    def get(self, v: SSAValue) -> Lanes:
        return lanes(self.env[self.slot(v)])

    def buffer(self, v: SSAValue) -> Buffer:
        value = self.env[self.slot(v)]
        assert isinstance(value, Buffer), v
        return value

    # ---- regions -----------------------------------------------------------------------------

    def compile_block(self, block: Block) -> tuple[list[int], list[Step], list[int]]:
        args = [self.slot(a) for a in block.args]
        steps: list[Step] = []
        yields: list[int] = []
        for op in block.ops:
            if isinstance(op, scf.YieldOp | affine.YieldOp | egpu.ReturnOp | func.ReturnOp):
                yields = [self.slot(o) for o in op.operands]
                break
            compiler = COMPILERS.get(type(op))
            if compiler is None:
                raise UnsupportedIR(op)
            steps.append(compiler(self, op))
        code = self.code[block] = (args, steps, yields)
        return code

    def run_block(self, block: Block, mask: Lanes | None, args: Sequence[object] = ()) -> list[object]:
        """Run `block` for the lanes of `mask` (None: all); the terminator's operands."""
        code = self.code.get(block) or self.compile_block(block)
        env = self.env
        for s, value in zip(code[0], args):
            env[s] = value
        for step in code[1]:
            step(mask)
        return [env[s] for s in code[2]]

    def run_region(self, region: Region, mask: Lanes | None, args: Sequence[object] = ()) -> list[object]:
        if len(region.blocks) != 1:
            raise UnsupportedIR(region.parent_op() or "region", "regions of several blocks")
        return self.run_block(region.block, mask, args)

    # ---- launches ----------------------------------------------------------------------------

    def launch(self, op: egpu.LaunchOp) -> None:
        name = op.callee.string_value()
        kernel = self.kernels.get(name)
        if kernel is None:
            raise KernelFault(f"egpu.launch of an unknown kernel @{name}")
        host = [self.buffer(b) for b in op.buffers]
        attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else ()
        args: list[Buffer] = []
        for k, b in enumerate(host):
            label = attrs[k].data.get(NAME_ATTR) if k < len(attrs) else None
            name_k = label.data if isinstance(label, StringAttr) else b.name
            args.append(Buffer(b.data, name_k, readonly=b.readonly))
        self.launches += 1
        split = kernel.attributes.get("egpu.tile_split")
        saved, saved_loop = self.grid, self.point_loop
        if isinstance(split, egpu.TileSplitAttr) and split.data.split and not split.data.in_boxes:
            self.grid = self._vertices(kernel, split.data, args)
        else:
            self.grid = Grid(name, kernel.grid_size, kernel.block_size, launch=self.launches)
        try:
            self.run_region(kernel.body, None, args)
        finally:
            self.grid, self.point_loop = saved, saved_loop

    def _vertices(self, kernel: egpu.FuncOp, split: egpu.TileSplit, args: list[Buffer]) -> Grid:
        """Poplar: vertex t (a block of the kernel's workers) runs the points [t * chunk,
        min((t + 1) * chunk, points)) of the point loop, seeing only its slices."""
        from einc.transforms.vertex_split import point_loop

        grid = Grid(kernel.sym_name.data, (split.vertices, 1, 1), kernel.block_size,
                    launch=self.launches, vertex_of_block=True)  # fmt: skip
        begin = grid.block_of * split.chunk
        end = np.minimum(begin + split.chunk, split.points)
        self.point_loop = (point_loop(kernel), begin, end)
        vertex = grid.block_of
        for k, s, c in split.written:
            args[k].window = Window(s * begin + c, s * (end - 1) + c + 1, s, c, "points")
        for k, first, last in split.read:
            args[k].window = Window(np.asarray(first)[vertex], np.asarray(last)[vertex])
        return grid

    # ---- host loops run as lanes ---------------------------------------------------------------

    def parallel_nest(self, op: affine.ForOp) -> bool:
        """Run the outer loops of a host loop nest as lanes of one block, with the race
        detector on: where two iterations touch one element (one writing), the buffers are
        restored and fewer loops are tried; False where none can (the caller then runs the
        loops in order). The loops tried: the perfect nest's loops of constant bounds up to
        the first a store does not index with (`expand.independent_prefix`), longest first;
        the length that worked is remembered for the next run of the nest."""
        from einc.transforms.gpu_mapping import perfect_chain
        from einc.transforms.ranges import constant_trip_range

        if self.grid.kernel is not None:
            return False
        chain = self.nests.get(op)
        if chain is None:
            chain = []
            for loop in perfect_chain(op):
                if constant_trip_range(loop) is None or loop.results:
                    break
                chain.append(loop)
            chain = self.nests[op] = [c for c in independent_prefix(list(chain)) if isinstance(c, affine.ForOp)]
        while chain:
            if self._run_as_lanes(chain):
                return True
            chain = self.nests[op] = chain[:-1]
        return False

    def _run_as_lanes(self, chain: list[affine.ForOp]) -> bool:
        from einc.transforms.ranges import constant_trip_range

        ranges = []
        for loop in chain:
            bounds = constant_trip_range(loop)
            assert bounds is not None
            step = loop.step.value.data
            ranges.append((bounds[0], step, max(0, -(-(bounds[1] - bounds[0]) // step))))
        trips = [n for _, _, n in ranges]
        lanes = int(np.prod(trips))
        if lanes < 2 or lanes > 1 << 20:
            return False
        saved_data = [(b, b.data.copy()) for b in self.host_buffers if not b.readonly]
        self.launches += 1
        names = tuple((loop.body.block.args[0].name_hint or f"loop{k}", n) for k, (loop, n) in enumerate(zip(chain, trips)))
        saved, self.grid = self.grid, Grid("<host loops>", (1, 1, 1), (lanes, 1, 1), launch=self.launches, nest=names)
        ivs = [(lo + i.astype(np.int64) * step) for i, (lo, step, _) in zip(np.unravel_index(np.arange(lanes), trips), ranges)]
        try:
            for loop, iv in zip(chain[:-1], ivs):
                self.env[self.slot(loop.body.block.args[0])] = iv
            self.run_block(chain[-1].body.block, None, [ivs[-1]])
        except DataRace:
            for b, data in saved_data:
                b.data[...] = data
            return False
        finally:
            self.grid = saved
        return True

    # ---- loops -------------------------------------------------------------------------------

    def loop(self, op: Operation, body: Region, lb: Lanes, ub: Lanes, step: Lanes,
             carried: list[object], mask: Lanes | None, iv_type: Attribute) -> list[object]:  # fmt: skip
        if self.point_loop is not None and self.point_loop[0] is op:
            _, begin, end = self.point_loop
            lb, ub = np.asarray(lb) + begin, np.minimum(ub, end)
        if np.ndim(step) != 0:
            raise UnsupportedIR(op, "a step that differs between work-items")
        dtype = dtype_of(iv_type)
        s = int(step)
        if s <= 0:
            raise KernelFault(f"{op.name} with step {s}")
        lanes = self.grid.lanes
        if self.grid.kernel is not None and not carried and not self.grid.expansion:
            lo = np.broadcast_to(np.asarray(lb, np.int64), (lanes,))
            hi = np.broadcast_to(np.asarray(ub, np.int64), (lanes,))
            if run_expanded(self, op, lo, hi, s, dtype, mask):
                return []
        if np.ndim(lb) == 0 and np.ndim(ub) == 0:
            for i in range(int(lb), int(ub), s):
                carried = self.run_region(body, mask, [dtype.type(i), *carried])
            return carried
        lo = np.broadcast_to(np.asarray(lb, np.int64), (lanes,))
        hi = np.broadcast_to(np.asarray(ub, np.int64), (lanes,))
        trips = np.maximum(0, -((lo - hi) // s))
        active = trips if mask is None else np.where(mask, trips, 0)
        for k in range(int(active.max(initial=0))):
            m = active > k
            results = self.run_region(body, m, [(lo + k * s).astype(dtype), *carried])
            carried = [merge(m, r, c) for r, c in zip(results, carried)]
        return carried

    # ---- work-items --------------------------------------------------------------------------

    def coordinate(self, op: egpu.IndexOp) -> Lanes:
        g, d = self.grid, op.dimension.index
        if isinstance(op, egpu.ThreadIdOp):
            return g.thread_id[d]
        if isinstance(op, egpu.BlockDimOp):
            return lanes(np.int64(g.block[d]))
        if g.vertex_of_block:  # a Poplar vertex sees the kernel's grid of one block
            if isinstance(op, egpu.GlobalIdOp):
                return g.thread_id[d]
            return lanes(np.int64(1)) if isinstance(op, egpu.GridDimOp) else np.zeros(g.lanes, np.int64)
        if isinstance(op, egpu.BlockIdOp):
            return g.block_id[d]
        if isinstance(op, egpu.GlobalIdOp):
            return g.global_id[d]
        if isinstance(op, egpu.GridDimOp):
            return lanes(np.int64(g.grid[d]))
        raise UnsupportedIR(op)

    def barrier(self, op: Operation, mask: Lanes | None) -> None:
        g = self.grid
        if g.kernel is None:
            raise KernelFault(f"{op.name} outside a kernel")
        if mask is not None:
            per_block = np.asarray(mask).reshape(g.blocks, g.per_block)
            reached = per_block.sum(axis=1)
            partial = (reached > 0) & (reached < g.per_block)
            if partial.any():
                b = int(np.argmax(partial))
                lane = b * g.per_block + int(np.argmin(per_block[b]))
                raise KernelFault(
                    f"egpu.barrier in kernel {g.kernel} reached by {int(reached[b])} of the "
                    f"{g.per_block} work-items of block {b}: {g.describe(lane)} does not reach it"
                )
        g.epoch += 1

    def subgroup_reduce(self, op: egpu.SubgroupReduceOp, x: Lanes, mask: Lanes | None) -> Lanes:
        g = self.grid
        if op.cluster_size is not None:
            cluster = op.cluster_size.value.data
        elif self.subgroup_size is not None:
            cluster = self.subgroup_size
        else:
            raise UnsupportedIR(op, "without `cluster`, it needs the target's subgroup size (pass target=)")
        if self.subgroup_size is not None and cluster > self.subgroup_size:
            raise KernelFault(f"egpu.subgroup_reduce: cluster {cluster} is larger than the subgroup ({self.subgroup_size})")
        cluster = min(cluster, g.per_block)
        if g.per_block % cluster or cluster & (cluster - 1):
            raise KernelFault(
                f"egpu.subgroup_reduce: clusters of {cluster} work-items straddle the blocks "
                f"of {g.per_block} of kernel {g.kernel}"
            )
        value = np.broadcast_to(np.asarray(x), (g.lanes,))
        if mask is not None:
            per = np.asarray(mask).reshape(-1, cluster)
            reached = per.sum(axis=1)
            partial = (reached > 0) & (reached < cluster)
            if partial.any():
                c = int(np.argmax(partial))
                lane = c * cluster + int(np.argmin(per[c]))
                raise KernelFault(
                    f"egpu.subgroup_reduce in kernel {g.kernel} reached by {int(reached[c])} of the "
                    f"{cluster} work-items of its cluster: {g.describe(lane)} does not reach it"
                )
        v = value.reshape(-1, cluster).copy()
        kind = str(op.kind.data)
        offset = cluster // 2
        ids = np.arange(cluster)
        while offset:
            v = V.combine(kind, v, v[:, ids ^ offset])
            offset //= 2
        return v.reshape(-1).astype(value.dtype)


