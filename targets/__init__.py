"""einc's code generation targets: a shared C-like printer and one small file per target."""

from __future__ import annotations

from collections.abc import Callable

from einc.targets.clike import CLikeTarget


def get_all_targets() -> dict[str, Callable[[], type[CLikeTarget]]]:
    """Target name -> a function returning the target class (imported on demand). A target
    object has `pipeline` (the passes reaching its input level) and `emit(module) -> str`."""

    def c():
        from einc.targets.c import CTarget

        return CTarget

    return {"c": c}
