"""einc's passes, one ModulePass per file, and the registry the drivers use.

The registry holds einc's own passes (`builtin_passes`) and the passes plugins registered
(`register_plugin_pass`: a `--load-pass-plugin` file or an `einc.passes` entry point, see
einc.compiler.plugins); `get_all_passes()` has both, so every pipeline text einc parses
(`run_pipeline`, einc-opt, `transform.apply_registered_pass`, the stage hooks) sees them.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import get_type_hints

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError
from xdsl.utils.hints import type_repr

from einc.errors import SourceLocation, UsageError


@dataclass(frozen=True)
class PluginPass:
    """A pass a plugin registered: its class and where it came from (the plugin file, or
    `entry point NAME of DIST`), for listings and for the errors it raises."""

    cls: type[ModulePass]
    origin: str


_PLUGINS: dict[str, PluginPass] = {}


def register_plugin_pass(cls: type[ModulePass], origin: str) -> None:
    """Register `cls` under its `name` (einc.compiler.plugins checks clashes before calling this)."""
    _PLUGINS[cls.name] = PluginPass(cls, origin)


def plugin_passes() -> dict[str, PluginPass]:
    """The plugin passes: those loaded from files, and the `einc.passes` entry points of the
    installed packages (read once, on the first call)."""
    from einc.compiler.plugins import load_entry_points

    load_entry_points()
    return dict(_PLUGINS)


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name -> a function returning the pass class: einc's own passes, the xDSL passes
    einc pipelines use, and the plugins' passes."""
    passes = builtin_passes()
    for name, plugin in plugin_passes().items():
        passes[name] = lambda cls=plugin.cls: cls
    return passes


def builtin_passes() -> dict[str, Callable[[], type[ModulePass]]]:
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
        from einc.schedule.apply_pass import ApplySchedulePass

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
        from xdsl.transforms.loop_invariant_code_motion import (
            LoopInvariantCodeMotionPass,
        )

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


def run_pipeline(ctx: Context, module: ModuleOp, pipeline: str, label: str = "pass-pipeline") -> None:
    """Apply a flat pipeline spec (`a,b{opt=1}`) of registered passes to `module` in place;
    with `EINC_VERIFY_EACH=1`, verify the IR after each pass (`verify-egpu`). A pass that is
    not registered or a bad option: a UsageError in the text `label` (`parse_passes`). The ops
    each pass makes are located where what they were made from is
    (einc.ir.locations.keeping_locations)."""
    from einc.ir.locations import keeping_locations

    if not pipeline:
        return
    passes = keeping_locations(PassPipeline(parse_passes(pipeline, get_all_passes(), label)))
    if os.environ.get("EINC_VERIFY_EACH", "") not in ("", "0"):
        from einc.passes.verify_egpu import verifying

        passes = verifying(passes)
    passes.apply(ctx, module)


# ---- pipeline texts: unknown passes and bad options as located errors ------------------------
def parse_passes(
    spec: str, available: dict[str, Callable[[], type[ModulePass]]] | None = None, label: str = "pass-pipeline"
) -> tuple[ModulePass, ...]:
    """The passes of the pipeline text `spec` (an MLIR-style `builtin.module(...)` wrapper
    is accepted). A malformed text, an unknown pass (with the closest names), an option the
    pass does not have, or a value of the wrong type: a UsageError at that place in `spec`,
    the file name `label` (`pass-pipeline:1:12: error: ...`)."""
    available = get_all_passes() if available is None else available
    spec = strip_module_wrapper(spec)
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as err:  # xDSL's lexer: 'pass-pipeline:L:C', the text, a caret, why
        lines = str(err).splitlines()
        col = lines[3].find("^") + 1 if len(lines) >= 5 else 1
        reason = lines[4].strip() if len(lines) >= 5 else str(err)
        raise UsageError(reason, SourceLocation(label, 1, max(1, col), 1, spec)) from None
    return tuple(_make_pass(arg, available, spec, label) for arg in specs)


def strip_module_wrapper(spec: str) -> str:
    spec = spec.strip()
    if spec.startswith("builtin.module(") and spec.endswith(")"):
        return spec[len("builtin.module(") : -1]
    return spec


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `choices`, or ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _place(spec: str, word: str, after: int = 0) -> tuple[int, int]:
    """The column and length of `word` (a whole name) in `spec`, from `after` on."""
    found = re.compile(rf"(?<![\w.-]){re.escape(word)}(?![\w.-])").search(spec, after)
    return (found.start() + 1, len(word)) if found else (1, max(1, len(spec)))


def _make_pass(
    arg: ArgSpec, available: dict[str, Callable[[], type[ModulePass]]], spec: str, label: str
) -> ModulePass:
    def error(message: str, word: str, after: int = 0) -> UsageError:
        col, length = _place(spec, word, after)
        return UsageError(message, SourceLocation(label, 1, col, length, spec))

    if arg.name not in available:
        raise error(
            f"unknown pass '{arg.name}'{did_you_mean(arg.name, available)} "
            "(einc-opt --list-passes lists them)", arg.name,
        )  # fmt: skip
    cls = available[arg.name]()
    at = _place(spec, arg.name)[0] - 1
    options = {f.name: f for f in fields(cls) if f.init and f.name != "name"}
    given = {name.replace("-", "_"): value for name, value in arg.parameters.items()}
    for name in given:
        if name not in options:
            listing = f"its options: {', '.join(options)}" if options else "it has no options"
            raise error(
                f"pass '{arg.name}' has no option '{name}'{did_you_mean(name, options)} ({listing})",
                name.replace("_", "-") if name.replace("_", "-") in spec else name, at,
            )  # fmt: skip
    try:
        return cls.from_pass_spec(arg)
    except (ValueError, TypeError) as err:
        hints = get_type_hints(cls)
        for name, value in given.items():  # xDSL names the value, not the option: find it
            if f"given {value}," in str(err) or f"given {tuple(value)}," in str(err):
                wanted = type_repr(hints[name])
                shown = ",".join(str(v) for v in value) or "(nothing)"
                raise error(
                    f"pass '{arg.name}' option '{name}': '{shown}' is not a value of type {wanted}",
                    name.replace("_", "-") if name.replace("_", "-") in spec else name, at,
                ) from None
        raise error(f"pass '{arg.name}': {err}", arg.name) from None
