"""`einc-pad-shared`: pad the rows of shared tiles against bank conflicts.

Shared memory is split into banks of 4-byte words (`TargetDescription.shared_banks`, 32 on
NVIDIA and AMD GPUs): the lanes of a warp reading distinct words of one bank are served one
after another. A tile whose rows are a multiple of the bank count long puts a column in one
bank, and a warp whose lanes read down a column (`T[thread_x][k]`) waits 32 times. Padding
each row by a few elements (`memref<32x32xf32>` held as `memref<32x36xf32>`, the extra
columns never touched) spreads the column over the banks; indices are unchanged, only the
row stride of the flat index grows.

Per `egpu.alloc_shared` of rank 2 or more, the pad of its innermost dimension is
- the schedule's, where the cache op said `pad N` (`einc.pad` on the buffer, 0 included);
- else the one of 0, 4, 8, ... words (multiples of 16 bytes: the aligned vector loads of
  `einc-vectorize-shared-loads` stay aligned; 1 for tiles whose rows are not 16-byte
  multiples anyway) below the bank count with the fewest conflicting wavefronts, summed over
  the tile's loads, for the first warp of the block (lanes `0 .. min(32, threads) - 1` at
  their thread coordinates, every other value the same for all lanes); 0 on a tie, and 0
  where an index is not affine in the thread ids (nothing to reason about);
and never one that would overflow the target's shared memory (an explicit one is then a
TargetError at the kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.rewriter import Rewriter

from einc.dialects import egpu
from einc.ir.attrs import PAD_ATTR
from einc.passes.targeted import TargetedPass
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.loop_analysis import linear_form

Lanes = dict[int, int]
"""Coefficients of the thread ids x, y, z (0, 1, 2) in a value; absent: 0."""


def _lanes(v: SSAValue, depth: int = 0) -> Lanes | None:
    """`v` as a linear function of the thread ids (other values taken as the same in every
    lane: their terms drop), or None where it is not affine in them."""
    owner = v.owner
    if isinstance(owner, egpu.ThreadIdOp):
        return {owner.dimension.index: 1}
    if isinstance(owner, affine.ApplyOp) and depth < 16:
        form = linear_form(dims_to_operands(owner.map.data).results[0], list(owner.mapOperands))
        if form is None:
            return None if any(_lanes(o, depth + 1) for o in owner.mapOperands) else {}
        out: Lanes = {}
        for operand, c in form[0].items():
            inner = _lanes(operand, depth + 1)
            if inner is None:
                return None
            for d, k in inner.items():
                out[d] = out.get(d, 0) + c * k
        return out
    return {}


def _flat_lanes(load: affine.LoadOp, shape: list[int]) -> list[Lanes] | None:
    """Per dimension of `load`'s index: its thread-id coefficients (None: not affine)."""
    m = dims_to_operands(load.map.data)
    dims: list[Lanes] = []
    for e in m.results:
        form = linear_form(e, list(load.indices))
        if form is None:
            return None
        out: Lanes = {}
        for operand, c in form[0].items():
            inner = _lanes(operand)
            if inner is None:
                return None
            for d, k in inner.items():
                out[d] = out.get(d, 0) + c * k
        dims.append(out)
    return dims if len(dims) == len(shape) else None


def wavefronts(accesses: list[list[Lanes]], shape: list[int], pad: int, block: tuple[int, ...],
               words_per_element: float, banks: int) -> int:  # fmt: skip
    """The wavefronts of the first warp's accesses to a tile of `shape` padded by `pad`."""
    padded = [*shape[:-1], shape[-1] + pad]
    strides = [math.prod(padded[d + 1 :]) for d in range(len(padded))]
    lanes = min(32, math.prod(block))
    coords = [(t % block[0], t // block[0] % block[1], t // (block[0] * block[1])) for t in range(lanes)]
    total = 0
    for dims in accesses:
        words: dict[int, set[int]] = {}
        for xyz in coords:
            flat = sum(s * sum(c * xyz[d] for d, c in lanes_of.items()) for s, lanes_of in zip(strides, dims))
            word = int(flat * words_per_element)
            words.setdefault(word % banks, set()).add(word)
        total += max(len(w) for w in words.values())
    return total


def choose_pad(kernel: egpu.FuncOp, alloc: egpu.AllocSharedOp, banks: int) -> int:
    """The default pad of `alloc`'s rows (module docstring)."""
    memory = alloc.memref.type
    assert isinstance(memory, MemRefType)
    shape = list(memory.get_shape())
    element = memory.get_element_type()
    width = getattr(element, "bitwidth", None) or getattr(getattr(element, "width", None), "data", 32)
    bytes_ = max(1, width // 8)
    accesses: list[list[Lanes]] = []
    for use in alloc.memref.uses:
        if isinstance(use.operation, affine.LoadOp):
            dims = _flat_lanes(use.operation, shape)
            if dims is None:
                return 0
            accesses.append(dims)
    if not accesses:
        return 0
    row_bytes = shape[-1] * bytes_
    step = max(1, 16 // bytes_) if row_bytes % 16 == 0 else 1
    candidates = list(range(0, max(step, banks * 4 // bytes_), step))
    block = kernel.block_size
    cost = {p: wavefronts(accesses, shape, p, block, bytes_ / 4, banks) for p in candidates}
    return min(candidates, key=lambda p: (cost[p], p))


@dataclass(frozen=True)
class PadSharedPass(TargetedPass):
    name = "einc-pad-shared"

    target: str = "cuda"
    """Whose description gives the bank count and the shared memory per block."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        desc = self.limits()
        for kernel in [k for k in op.walk() if isinstance(k, egpu.FuncOp)]:
            for alloc in [a for a in kernel.body.block.ops if isinstance(a, egpu.AllocSharedOp)]:
                explicit = alloc.attributes.pop(PAD_ATTR, None)
                memory = alloc.memref.type
                assert isinstance(memory, MemRefType)
                shape = list(memory.get_shape())
                if len(shape) < 2:
                    continue
                if isinstance(explicit, IntegerAttr):
                    pad = explicit.value.data
                else:
                    pad = choose_pad(kernel, alloc, desc.shared_banks)
                if pad == 0:
                    continue
                padded = egpu.AllocSharedOp(MemRefType(memory.get_element_type(), [*shape[:-1], shape[-1] + pad]))
                padded.memref.name_hint = alloc.memref.name_hint
                extra = padded.bytes - alloc.bytes
                if kernel.shared_bytes() + extra > desc.shared_bytes_per_block:
                    if explicit is None:
                        continue
                    desc.check_launch(kernel.sym_name.data, kernel.grid_size, kernel.block_size,
                                      kernel.shared_bytes() + extra, origin=kernel.location)  # fmt: skip
                Rewriter.replace_op(alloc, padded)


__all__ = ["PadSharedPass", "choose_pad", "wavefronts"]
