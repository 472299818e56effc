"""The pass registry: einc's own passes (`builtin_passes`), the xDSL passes einc pipelines use,
and the passes plugins register, so that every pipeline text einc parses (`run_pipeline`,
einc-opt, `transform.apply_registered_pass`, the stage hooks) can name them.

    get_all_passes()                   # name -> a function returning the pass class
    load_pass_plugin("my_passes.py")   # -> ["my-pass"]: every ModulePass subclass defined there
    load_entry_points()                # the `einc.passes` entry points of installed packages

A plugin that cannot be imported, defines no pass, or names a pass like one already
registered is a UsageError (at the command-line option when the caller gives its place).
An exception raised by a plugin pass while it runs is a `PluginPassError`: an internal
error that names the pass and its plugin instead of blaming einc. The registry is handed to
those who parse pipelines (einc.passes.pipeline.parse_passes, the schedule interpreter);
they never fetch it themselves.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

from einc.errors import EincError, InternalCompilerError, SourceLocation, UsageError
from einc.ir.locations import keeping_locations
from einc.passes.pipeline import PassPlace, option_named, parse_passes, place
from einc.passes.targeted import bind_target
from einc.targets.clike import CLikeTarget


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

    def legalize_bf16_storage():
        from einc.passes.legalize_bf16_storage import LegalizeBf16StoragePass

        return LegalizeBf16StoragePass

    def einc_apply_schedule():
        from einc.schedule.apply_pass import ApplySchedulePass

        return ApplySchedulePass.using(get_all_passes)  # the schedule's apply_registered_pass: this registry

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

    def einc_init_accumulators():
        from einc.passes.init_accumulators import InitAccumulatorsPass

        return InitAccumulatorsPass

    def einc_hoist_packs():
        from einc.passes.hoist_packs import HoistPacksPass

        return HoistPacksPass

    def einc_index_width():
        from einc.passes.index_width import IndexWidthPass

        return IndexWidthPass

    def einc_async_copies():
        from einc.passes.async_copies import AsyncCopiesPass

        return AsyncCopiesPass

    def einc_ldmatrix():
        from einc.passes.ldmatrix import LdmatrixPass

        return LdmatrixPass

    def einc_widen_narrow_buffers():
        from einc.passes.widen_narrow_buffers import WidenNarrowBuffersPass

        return WidenNarrowBuffersPass

    def einc_pad_shared():
        from einc.passes.pad_shared import PadSharedPass

        return PadSharedPass

    def einc_vectorize_shared_loads():
        from einc.passes.vectorize_shared_loads import VectorizeSharedLoadsPass

        return VectorizeSharedLoadsPass

    def einc_vectorize_global():
        from einc.passes.vectorize_global import VectorizeGlobalPass

        return VectorizeGlobalPass

    def einc_vectorize_loops():
        from einc.passes.vectorize_loops import VectorizeLoopsPass

        return VectorizeLoopsPass

    def einc_split_index_axes():
        from einc.passes.split_index_axes import SplitIndexAxesPass

        return SplitIndexAxesPass

    def einc_coalesce_stream_copies():
        from einc.passes.coalesce_stream_copies import CoalesceStreamCopiesPass

        return CoalesceStreamCopiesPass

    def einc_stream_stores():
        from einc.passes.stream_stores import StreamStoresPass

        return StreamStoresPass

    def einc_unswitch():
        from einc.passes.unswitch import UnswitchPass

        return UnswitchPass

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
        "legalize-bf16-storage": legalize_bf16_storage,
        "legalize-storage-dtypes": legalize_storage_dtypes,
        "legalize-narrow-ints": legalize_narrow_ints,
        "legalize-float-to-int": legalize_float_to_int,
        "einc-apply-schedule": einc_apply_schedule,
        "einc-tile": einc_tile,
        "einc-vectorize-loops": einc_vectorize_loops,
        "einc-split-index-axes": einc_split_index_axes,
        "einc-init-accumulators": einc_init_accumulators,
        "einc-hoist-packs": einc_hoist_packs,
        "einc-stream-stores": einc_stream_stores,
        "einc-coalesce-stream-copies": einc_coalesce_stream_copies,
        "einc-unswitch": einc_unswitch,
        "einc-index-width": einc_index_width,
        "einc-vectorize-shared-loads": einc_vectorize_shared_loads,
        "einc-vectorize-global": einc_vectorize_global,
        "einc-pad-shared": einc_pad_shared,
        "einc-widen-narrow-buffers": einc_widen_narrow_buffers,
        "einc-async-copies": einc_async_copies,
        "einc-ldmatrix": einc_ldmatrix,
        "verify-egpu": verify_egpu,
        "split-poplar-vertices": split_poplar_vertices,
        "canonicalize": canonicalize,
        "cse": cse,
        "dce": dce,
        "licm": licm,
        "lower-affine": lower_affine,
    }


def run_pipeline(
    ctx: Context, module: ModuleOp, pipeline: str, label: str = "pass-pipeline", target: type[CLikeTarget] | None = None
) -> None:
    """Apply a flat pipeline spec (`a,b{opt=1}`) of registered passes to `module` in place;
    with `EINC_VERIFY_EACH=1`, verify the IR after each pass (`verify-egpu`). A pass that is
    not registered or a bad option: a UsageError in the text `label` (`parse_passes`). With
    `target`, the passes that read a target's facts are handed that target (`bind_target`).
    The ops each pass makes are located where what they were made from is
    (einc.ir.locations.keeping_locations)."""
    if not pipeline:
        return
    parsed = parse_passes(pipeline, get_all_passes(), label)
    passes = keeping_locations(PassPipeline(bind_target(parsed, target) if target is not None else parsed))
    if os.environ.get("EINC_VERIFY_EACH", "") not in ("", "0"):
        from einc.passes.verify_egpu import verifying

        passes = verifying(passes)
    passes.apply(ctx, module)


# ---- plugins: pass files and the entry points of installed packages ---------------------------
ENTRY_POINT_GROUP = "einc.passes"


_LOADED_FILES: dict[Path, list[str]] = {}


class PluginPassError(InternalCompilerError):
    """A plugin pass raised: a bug in that pass (or in einc's IR it met), not in the program."""

    def __init__(self, pass_name: str, origin: str, exc: BaseException):
        Exception.__init__(
            self,
            f"internal error in plugin pass '{pass_name}' (from {origin}): {type(exc).__name__}: {exc}\n"
            f"(the pass came from the plugin {origin}, not from einc; fix the plugin or leave it "
            "out of the pipeline)",
        )
        self.message = f"plugin pass '{pass_name}' (from {origin}): {type(exc).__name__}: {exc}"
        self.stage = None
        self.context = {"plugin pass": pass_name, "plugin": origin}
        self.__cause__ = exc


def load_pass_plugin(path: str, where: SourceLocation | None = None) -> list[str]:
    """Import the Python file `path` and register every `ModulePass` subclass defined in it
    (not those it imports) under its `name`; the names registered, in definition order.
    Loading the same file again registers nothing new and returns the same names. A
    failure is a UsageError at `where` (default: the file itself)."""
    where = where or SourceLocation(path, 1, 1)
    file = Path(path).resolve()
    if file in _LOADED_FILES:
        return list(_LOADED_FILES[file])
    if not file.is_file():
        raise UsageError(f"cannot load the pass plugin '{path}': no such file", where)
    module_name = f"einc_plugin_{abs(hash(str(file))):x}_{file.stem}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load the pass plugin '{path}': not a Python file", where)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[module_name]
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise UsageError(f"cannot load the pass plugin '{path}': {_failure(exc, file)}", where) from None
    classes = [c for c in _passes_defined_in(module) if c.__module__ == module_name]
    if not classes:
        raise UsageError(
            f"the pass plugin '{path}' defines no pass (a subclass of xdsl.passes.ModulePass "
            "with a `name`)", where,
        )  # fmt: skip
    names = _register(classes, str(path), where)
    _LOADED_FILES[file] = names
    return names


def load_pass_plugins(paths: list[str], argv: list[str] | None = None, tool: str = "einc") -> list[str]:
    """`load_pass_plugin` for each `--load-pass-plugin PATH` of a command line `argv` (errors
    at that option); the names registered."""
    names: list[str] = []
    for path in paths:
        where = None
        if argv is not None:
            text = " ".join([tool, *argv])
            col, length = place(text, path)
            where = SourceLocation("<command line>", 1, col, length, text)
        names += load_pass_plugin(path, where)
    return names


@functools.cache
def load_entry_points() -> list[str]:
    """Register the passes of the installed packages' `einc.passes` entry points (each names
    a ModulePass subclass, or a module whose ModulePass subclasses are all registered); read
    once. A broken entry point is a warning on stderr (an installed package must not stop
    every compilation), and its passes are not registered."""
    names: list[str] = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = entry.dist.name if entry.dist is not None else "an unknown package"
        origin = f"entry point '{entry.name} = {entry.value}' of {dist}"
        try:
            loaded = entry.load()
            if isinstance(loaded, ModuleType):
                classes = [c for c in _passes_defined_in(loaded) if c.__module__ == loaded.__name__]
            elif inspect.isclass(loaded) and issubclass(loaded, ModulePass):
                classes = [loaded]
            else:
                raise UsageError(f"it names {type(loaded).__name__} {loaded!r}, not a ModulePass subclass or a module")
            if not classes:
                raise UsageError("it defines no pass")
            names += _register(classes, origin, None)
        except Exception as exc:  # noqa: BLE001 - a broken package: warn and go on
            reason = exc.message if isinstance(exc, EincError) else _failure(exc, None)
            print(f"einc: warning: {ENTRY_POINT_GROUP} {origin} is not loaded: {reason}", file=sys.stderr)
    return names


def _passes_defined_in(module: ModuleType) -> list[type[ModulePass]]:
    return [
        value for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, ModulePass) and not inspect.isabstract(value)
        and isinstance(getattr(value, "name", None), str)
    ]  # fmt: skip


def _register(classes: list[type[ModulePass]], origin: str, where: SourceLocation | None) -> list[str]:
    """Register each class (wrapped by `_guarded`) after checking no name clashes."""
    taken = set(builtin_passes()) | set(_PLUGINS) | _xdsl_pass_names()
    for cls in classes:
        if cls.name in taken:
            owner = _PLUGINS[cls.name].origin if cls.name in _PLUGINS else "einc or xDSL"
            raise UsageError(
                f"the pass plugin {origin} defines pass '{cls.name}' ({cls.__name__}), a name "
                f"already taken by {owner}; rename the pass", where,
            )  # fmt: skip
        taken.add(cls.name)
    for cls in classes:
        register_plugin_pass(_guarded(cls, origin), origin)
    return [cls.name for cls in classes]


@functools.cache
def _xdsl_pass_names() -> frozenset[str]:
    from xdsl.universe import Universe

    return frozenset(Universe.get_multiverse().all_passes)


def _guarded(cls: type[ModulePass], origin: str) -> type[ModulePass]:
    """`cls` whose `apply` turns an exception that is not einc's located error into a
    PluginPassError naming the pass and `origin` (a subclass: options and `name` unchanged);
    except a ValueError naming one of the pass's options that its pipeline text sets, the pass
    refusing that value: a UsageError at the option in the text the pass came from."""
    apply = cls.apply
    options = [f.name for f in dataclasses.fields(cls) if f.init and f.name != "name"]

    def guarded_apply(self: ModulePass, ctx: Context, op: ModuleOp) -> None:
        try:
            apply(self, ctx, op)
        except (EincError, InternalCompilerError):
            raise
        except ValueError as exc:
            named = option_named(str(exc), options)
            place = PassPlace.of(self)
            if named is None or (place is not None and not place.writes(named)):  # its own default: its bug
                raise PluginPassError(cls.name, origin, exc) from exc
            value = getattr(self, named, None)
            raise UsageError(f"pass '{cls.name}' option '{named}' (= {value!r}): {exc}",
                             place.option(named) if place is not None else None) from None  # fmt: skip
        except Exception as exc:
            raise PluginPassError(cls.name, origin, exc) from exc

    guarded = type(cls.__name__, (cls,), {"apply": guarded_apply, "__module__": cls.__module__,
                                          "__doc__": cls.__doc__, "__qualname__": cls.__qualname__})  # fmt: skip
    return guarded


def _failure(exc: BaseException, file: Path | None) -> str:
    """An import failure in one line, at the plugin file's line when the traceback has one."""
    if isinstance(exc, SyntaxError):
        return f"{exc.filename}:{exc.lineno}: SyntaxError: {exc.msg}"
    line = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if file is None or Path(frame.filename).resolve() == file:
            line = f"{frame.filename}:{frame.lineno}: "
            break
    return f"{line}{type(exc).__name__}: {exc}"
