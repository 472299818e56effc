"""Device (GPU) sketch rules: each statement nest's innermost spatial loop (and the one above
it) tiled, the tiles bound to work-groups (`block.x/y`) and work-items (`thread.x/y`), the
other spatial loops and the reductions run by each work-item. Knobs `stmt.axis.threads`:
work-items per work-group along the axis. Nests left unbound are mapped by the target's
pipeline as with no schedule.
"""

from __future__ import annotations

from xdsl.dialects import affine

from einc.tune.sketches.base import KnobRole, Nest, RuleContext, Sketch, band_of
from einc.tune.sketches.cpu import _Build, build_sketch

Y_THREADS = (1, 2, 4, 8)


def _pow2_upto(n: int, limit: int) -> tuple[int, ...]:
    found = sorted({1 << p for p in range(12) if 1 << p <= min(n, limit)} | ({n} if n <= limit else set()))
    return tuple(found) or (1,)


def bind_nest(build: _Build, nest: Nest, top: affine.ForOp, private: bool = False) -> bool:
    """Tile and bind one nest; `private`: its output accumulated in a work-item's private
    array across the reductions (cache_write local at the innermost bound loop)."""
    if not nest.perfect or nest.init or not nest.spatial:
        return False
    b, ctx = build.b, build.ctx
    handles = dict(zip(nest.axes, (b.handle(x) for x in band_of(top))))
    x = nest.spatial[-1]
    y = nest.spatial[-2] if len(nest.spatial) > 1 else None
    y_cap = max(Y_THREADS) if y is not None else 1
    opts = _pow2_upto(nest.extent(x), max(1, ctx.max_threads // y_cap))
    tx = _knob(build, nest, x, 0, opts)
    xo, xi = b.tile(handles[x], tx)
    bound = [(xo, "block.x")]
    inner = [(xi, "thread.x")]
    if y is not None:
        ty = _knob(build, nest, y, 0, _pow2_upto(nest.extent(y), y_cap), want=4)
        yo, yi = b.tile(handles[y], ty)
        bound.insert(0, (yo, "block.y"))
        inner.insert(0, (yi, "thread.y"))
    rest = [handles[s] for s in nest.spatial if s not in (x, y)] + [handles[r] for r in nest.reduction]
    order = [h for h, _ in bound] + [h for h, _ in inner] + rest
    new = b.reorder(order)
    for h, (_, axis) in zip(new, bound + inner):
        b.bind(h, axis, ctx.max_threads)
    out = nest.output()
    if private and nest.reduction and out is not None:
        b.try_(lambda: b.cache_write(out.name, new[len(bound + inner) - 1]))
    return True


def _knob(build: _Build, nest: Nest, axis: str, level: int, opts: tuple[int, ...], want: int = 64):  # type: ignore[no-untyped-def]
    value = max([v for v in opts if v <= want] or [opts[0]])
    name = f"{nest.stmt}.{axis}.threads"
    build.roles[name] = KnobRole(nest.stmt, axis, level, nest.extent(axis), "thread")
    return build.b.knob(name, value, opts)


def rule_bind(ctx: RuleContext) -> list[Sketch]:
    """`bind`: block/thread tiling of every statement nest; `bind.private`: the same with
    each reduction's output accumulated in private memory."""
    found = []
    for name, private, what in (("bind", False, ""), ("bind.private", True, ", reductions accumulated in private memory")):
        sketch = build_sketch(ctx, name, "the innermost spatial loops tiled and bound to work-groups and work-items, "
                              "the rest of each nest run by each work-item" + what,
                              lambda build, nest, top, private=private: bind_nest(build, nest, top, private), fallback=False)  # fmt: skip
        if sketch is not None and not any(str(s.schedule) == str(sketch.schedule) for s in found):
            found.append(sketch)
    return found


RULES = {"bind": rule_bind}
