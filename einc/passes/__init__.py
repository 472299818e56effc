"""einc's passes, one ModulePass per file, and the registry the drivers use."""

from __future__ import annotations

import os
from collections.abc import Callable

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name -> a function returning the pass class (imported on demand): einc's own
    passes and the xDSL passes einc pipelines use."""

    def convert_ein_to_affine():
        from einc.passes.convert_ein_to_affine import ConvertEinToAffinePass

        return ConvertEinToAffinePass

    def legalize_f16_for_c():
        from einc.passes.legalize_f16_for_c import LegalizeF16ForCPass

        return LegalizeF16ForCPass

    def convert_affine_to_egpu():
        from einc.passes.convert_affine_to_egpu import ConvertAffineToEgpuPass

        return ConvertAffineToEgpuPass

    def legalize_f16_storage():
        from einc.passes.legalize_f16_storage import LegalizeF16StoragePass

        return LegalizeF16StoragePass

    def einc_apply_schedule():
        from einc.passes.apply_schedule import ApplySchedulePass

        return ApplySchedulePass

    def einc_tile():
        from einc.passes.tile_loops import TileLoopsPass

        return TileLoopsPass

    def legalize_storage_dtypes():
        from einc.passes.legalize_storage_dtypes import LegalizeStorageDtypesPass

        return LegalizeStorageDtypesPass

    def legalize_float_to_int():
        from einc.passes.legalize_float_to_int import LegalizeFloatToIntPass

        return LegalizeFloatToIntPass

    def legalize_narrow_ints():
        from einc.passes.legalize_narrow_ints import LegalizeNarrowIntsPass

        return LegalizeNarrowIntsPass

    def einc_vectorize_loops():
        from einc.passes.vectorize_loops import VectorizeLoopsPass

        return VectorizeLoopsPass

    def verify_egpu():
        from einc.passes.verify_egpu import VerifyEgpuPass

        return VerifyEgpuPass

    def split_poplar_vertices():
        from einc.passes.split_poplar_vertices import SplitPoplarVerticesPass

        return SplitPoplarVerticesPass

    def canonicalize():
        from xdsl.transforms.canonicalize import CanonicalizePass

        return CanonicalizePass

    def cse():
        from xdsl.transforms.common_subexpression_elimination import (
            CommonSubexpressionElimination,
        )

        return CommonSubexpressionElimination

    def dce():
        from xdsl.transforms.dead_code_elimination import DeadCodeElimination

        return DeadCodeElimination

    def licm():
        from xdsl.transforms.loop_invariant_code_motion import LoopInvariantCodeMotionPass

        return LoopInvariantCodeMotionPass

    def lower_affine():
        from xdsl.transforms.lower_affine import LowerAffinePass

        return LowerAffinePass

    return {
        "convert-ein-to-affine": convert_ein_to_affine,
        "legalize-f16-for-c": legalize_f16_for_c,
        "convert-affine-to-egpu": convert_affine_to_egpu,
        "legalize-f16-storage": legalize_f16_storage,
        "legalize-storage-dtypes": legalize_storage_dtypes,
        "legalize-narrow-ints": legalize_narrow_ints,
        "legalize-float-to-int": legalize_float_to_int,
        "einc-apply-schedule": einc_apply_schedule,
        "einc-tile": einc_tile,
        "einc-vectorize-loops": einc_vectorize_loops,
        "verify-egpu": verify_egpu,
        "split-poplar-vertices": split_poplar_vertices,
        "canonicalize": canonicalize,
        "cse": cse,
        "dce": dce,
        "licm": licm,
        "lower-affine": lower_affine,
    }


def run_pipeline(ctx: Context, module: ModuleOp, pipeline: str) -> None:
    """Apply a flat pipeline spec (`a,b{opt=1}`) of registered passes to `module` in place,
    the ops each pass makes located where what they were made from is
    (einc.ir.locations.keeping_locations); with `EINC_VERIFY_EACH=1`, verify the IR after
    each pass (`verify-egpu`)."""
    from einc.ir.locations import keeping_locations

    if not pipeline:
        return
    passes = keeping_locations(PassPipeline.parse_spec(get_all_passes(), pipeline))
    if os.environ.get("EINC_VERIFY_EACH", "") not in ("", "0"):
        from einc.passes.verify_egpu import verifying

        passes = verifying(passes)
    passes.apply(ctx, module)
