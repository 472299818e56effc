"""Sketch rules per target: `rules_for(target)` gives {rule name: rule} (einc.tune.space
builds the space from them). CPU rules are in `cpu`, device (GPU) rules in `gpu`; the shared
vocabulary (KnobRole, Sketch, Nest) in `base`, features in `features`."""

from __future__ import annotations

from einc.tune.sketches.base import Rule


def rules_for(target: str) -> dict[str, Rule]:
    """The rules of the target's sketch family (`CLikeTarget.sketches`)."""
    from einc.targets import get_target

    family = get_target(target).sketches
    if family == "cpu":
        from einc.tune.sketches.cpu import RULES

        return dict(RULES)
    if family == "gpu":
        from einc.tune.sketches.gpu import RULES as GPU_RULES

        return dict(GPU_RULES)
    return {}
