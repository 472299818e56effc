"""Lanes over several groups (`transform.einc.group_lanes`): a loop `g` (a grouped
convolution's group, `F.q`) whose only child is a loop `f` (the channel in the group,
`F.r`) becomes `g.o` (|g| / k iterations) around one loop `l` of k * |f| iterations, with
`g = k * g.o + l floordiv |f|` and `f = l mod |f|`: the same iterations in the same order (no
legality condition beyond the shape). An index in which g and f form one contiguous
position (`8 * F.q + F.r`: the output's and the filter's channel) becomes `l` there
(`16 * F.q.o + l`, unit-stride), and one that reads g alone (the input channel
`8 * F.q + C`) reads `8 * (l floordiv 8)`: constant over runs of |f| lanes, which the
vectorizer loads once per run (`egpu.vbroadcast_runs`). With 8 channels per group and 16
float lanes, a vector of `l` spans two groups: whole vectors where each group alone fills
half of one.

Interleaved (`interleaved=True`), the group index is the fastest: `g = k * g.o + l mod k`, `f =
l floordiv k` (lane `k * f + g`). The output's and the filter's channel `8 * (l mod k) + l
floordiv k` is then no longer unit-stride in `l` (the default's packed filter and staged
output tile put it in lane order), and an input staged with the k groups innermost reads
`l mod k` in its last place: a run of k consecutive values repeated over the lanes (on
AVX-512, two groups' floats as one 64-bit broadcast: the pair form of README's grouped
convolution).

`group_lanes(g, k)` returns `(g.o, l)` or a Failure (a value; the IR untouched).
"""

from __future__ import annotations

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import Rewriter

from einc.transforms.affine_fold import fold_applies
from einc.transforms.affine_index import shared_dims, simplify_flat
from einc.transforms.loop_analysis import constant_bounds, induction_var, step_of
from einc.ir.attrs import AXIS_ATTR
from einc.transforms.loop_build import Failure, _new_loop, describe


def group_lanes(g: affine.ForOp, k: int, interleaved: bool = False) -> tuple[affine.ForOp, affine.ForOp] | Failure:
    """`g` tiled by `k` and its tile merged with its only child loop `f` into one loop of
    `k * |f|` iterations (module docstring; the group fastest where `interleaved`). Needs
    constant bounds from 0 with step 1 on both loops, `f` the only op in `g`'s body, and
    k >= 2 dividing |g|."""
    where = describe(g)
    if k < 2:
        return Failure(f"cannot group the lanes of {where}: the group count must be at least 2, got {k}")
    body = [op for op in g.body.block.ops if not isinstance(op, affine.YieldOp)]
    if len(body) != 1 or not isinstance(body[0], affine.ForOp):
        return Failure(f"cannot group the lanes of {where}: its body is not one loop")
    f = body[0]
    ends: list[int] = []
    for loop in (g, f):
        bounds = constant_bounds(loop)
        if bounds is None or bounds[0] != 0 or step_of(loop) != 1 or loop.results:
            return Failure(f"cannot group the lanes of {where}: {describe(loop)} does not run from 0 by 1 to a constant")
        ends.append(bounds[1])
    ng, nf = ends
    if ng % k:
        return Failure(f"cannot group the lanes of {where}: {k} groups do not divide its {ng} iterations")
    hint_g, hint_f = induction_var(g).name_hint or "g", induction_var(f).name_hint or "f"
    outer = _new_loop((), (), 0, ng // k, 1, hint_g + "_o")
    merged = _new_loop((), (), 0, k * nf, 1, hint_g + "_" + hint_f)
    # f's body moves into the merged loop: its iv (f) and g's become applies of l
    old_g, old_f = induction_var(g), induction_var(f)
    block = merged.body.block
    for op in list(block.ops):  # the empty body's yield
        Rewriter.erase_op(op)
    for op in list(f.body.block.ops):
        op.detach()
        block.add_op(op)
    outer_yield = outer.body.block.first_op
    assert outer_yield is not None
    outer.body.block.insert_op_before(merged, outer_yield)
    l, go = induction_var(merged), induction_var(outer)
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    g_in, f_in = (d1 % k, d0 // k) if interleaved else (d1 // nf, d0 % nf)
    g_value = affine.ApplyOp([go, l], AffineMapAttr(AffineMap(2, 0, (d0 * k + g_in,))))
    f_value = affine.ApplyOp([l], AffineMapAttr(AffineMap(1, 0, (f_in,))))
    first = block.first_op
    assert first is not None
    block.insert_op_before(g_value, first)
    block.insert_op_after(f_value, g_value)
    old_g.replace_uses_with_if(g_value.result, lambda use: True)
    old_f.replace_uses_with_if(f_value.result, lambda use: True)
    for name, value in g.attributes.items():
        outer.attributes[name] = value
    for name, value in f.attributes.items():
        merged.attributes[name] = value
    axis_g, axis_f = g.attributes.get(AXIS_ATTR), f.attributes.get(AXIS_ATTR)
    if isinstance(axis_g, StringAttr) and isinstance(axis_f, StringAttr):
        outer.attributes[AXIS_ATTR] = StringAttr(axis_g.data + ".o")
        merged_axis = f"{axis_f.data}*{axis_g.data}.i" if interleaved else f"{axis_g.data}.i*{axis_f.data}"
        merged.attributes[AXIS_ATTR] = StringAttr(merged_axis)
    Rewriter.replace_op(g, outer)
    fold_applies(merged)
    if not interleaved:
        _merge_positions(merged, l)
    return outer, merged


# ---- c*m*(l floordiv m) + c*(l mod m) -> c*l --------------------------------------------------


def _merge_positions(root: affine.ForOp, l: SSAValue) -> None:
    """Every affine load, store and apply under `root` whose map reads `l` with pairs
    `c*m*(l floordiv m) + c*(l mod m)` gets them merged into `c*l` (affine_index.simplify_flat,
    the re-linearisation coalesce's indices go through; same operands)."""
    for op in list(root.walk()):
        if not isinstance(op, affine.LoadOp | affine.StoreOp | affine.ApplyOp):
            continue
        operands = list(op.mapOperands if isinstance(op, affine.ApplyOp) else op.indices)
        if not any(v is l for v in operands):
            continue
        # `l` once: folding both applies of l may have made it two operands
        old = shared_dims(op.map.data, operands)
        results = tuple(simplify_flat(r) for r in old.results)
        if results == old.results:
            continue
        new_map = AffineMapAttr(AffineMap(old.num_dims, 0, results))
        new: Operation
        if isinstance(op, affine.LoadOp):
            new = affine.LoadOp(op.memref, operands, new_map, op.result.type)
        elif isinstance(op, affine.StoreOp):
            new = affine.StoreOp(op.value, op.memref, operands, new_map)
        else:
            new = affine.ApplyOp(operands, new_map)
        new.attributes.update(op.attributes)
        Rewriter.replace_op(op, new)
