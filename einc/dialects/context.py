"""The xDSL context einc works in: every upstream dialect plus einc's own."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import get_all_dialects


def einc_dialects() -> dict[str, object]:
    """einc's own dialects, by name, loaded lazily like xDSL's registry."""

    def ein():
        from einc.dialects.ein import Ein

        return Ein

    def egpu():
        from einc.dialects.egpu import EGPU

        return EGPU

    return {"ein": ein, "egpu": egpu}


def make_context() -> Context:
    """A fresh context that can parse and verify any IR einc produces."""
    ctx = Context(allow_unregistered=False)
    for name, factory in {**get_all_dialects(), **einc_dialects()}.items():
        ctx.register_dialect(name, factory)  # type: ignore[arg-type]
    load_einc_transform_ops(ctx)
    from einc.dialects.math_ext import load_ops

    load_ops(ctx)  # math.erfc: upstream MLIR's, missing from xDSL 0.74
    return ctx


def load_einc_transform_ops(ctx: Context) -> None:
    """einc's `transform.einc.*` schedule ops live inside the upstream transform dialect's
    namespace, so they are loaded op by op rather than as a dialect."""
    from einc.dialects.einc_transform import load_ops

    load_ops(ctx)
