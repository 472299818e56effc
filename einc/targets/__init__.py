"""einc's code generation targets: a shared C-like printer and one small file per target."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from xdsl.dialects.builtin import ModuleOp

from einc.errors import SourceLocation, TargetError
from einc.targets.clike import CLikeTarget
from einc.targets.descriptions import TargetDescription


LOOPS_PIPELINE = "convert-ein-to-affine,einc-split-index-axes"
"""The `loops` stage: `ein` to affine loops on memrefs (before a schedule and any target's
`pipeline`)."""


def get_target(name: str, loc: SourceLocation | None = None) -> type[CLikeTarget]:
    """The target class registered under `name` (the only place a name becomes a target),
    or a TargetError at `loc` listing the known targets."""
    targets = get_all_targets()
    if name not in targets:
        raise TargetError(
            f"unknown target '{name}' (available: {', '.join(sorted(targets))})",
            loc or SourceLocation("<command line>", 1, 1),
        )
    return targets[name]()


def get_all_targets() -> dict[str, Callable[[], type[CLikeTarget]]]:
    """Target name -> a function returning the target class (imported on demand). A target
    object has `pipeline` (the passes reaching its input level), `emit(module) -> str` and
    `build(source, module) -> runner`."""

    def c():
        from einc.targets.c import CTarget

        return CTarget

    def opencl():
        from einc.targets.opencl import OpenCLTarget

        return OpenCLTarget

    def cuda():
        from einc.targets.cuda import CUDATarget

        return CUDATarget

    def hip():
        from einc.targets.hip import HIPTarget

        return HIPTarget

    def hlsl():
        from einc.targets.hlsl import HLSLTarget

        return HLSLTarget

    def sycl():
        from einc.targets.sycl import SYCLTarget

        return SYCLTarget

    def poplar():
        from einc.targets.poplar import PoplarTarget

        return PoplarTarget

    return {
        "c": c, "opencl": opencl, "cuda": cuda, "hip": hip, "hlsl": hlsl, "sycl": sycl,
        "poplar": poplar,
    }  # fmt: skip


def description(target: str) -> TargetDescription:
    """The limits of device target `target` (its class's `limits`), or a TargetError."""
    limits = get_target(target, SourceLocation("<target>", 1, 1)).limits if target in get_all_targets() else None
    if limits is None:
        known = [n for n, f in get_all_targets().items() if f().limits is not None]
        raise TargetError(
            f"no device description for target '{target}' (known: {', '.join(sorted(known))})",
            SourceLocation("<target>", 1, 1),
        )
    return limits


def get_all_xdsl_targets() -> dict[str, Callable[[ModuleOp, IO[str]], None]]:
    """The same targets as xDSL opt-driver printers (`einc-opt -t c`): they print the module
    as it is, without running the target's pipeline."""

    def printer(factory: Callable[[], type[CLikeTarget]]) -> Callable[[ModuleOp, IO[str]], None]:
        def emit(module: ModuleOp, stream: IO[str]) -> None:
            stream.write(factory()().emit(module))

        return emit

    return {name: printer(factory) for name, factory in get_all_targets().items()}
