"""The base of passes that read a target's facts (its `limits`, vector width, element types).

The compiler hands the target over as an object: the driver binds each pass of the target's
pipeline to the target it compiles for (`bind_target`), so the pass reads that object and
never looks a name up. A pipeline text a user writes (einc-opt's `-p`, a schedule's
`transform.apply_registered_pass`) names the target by the pass's `target` option instead,
resolved by the registry (einc.targets.get_target) when the pass runs; a pass without that
option falls back to its `default_target`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Self

from xdsl.passes import ModulePass

from einc.targets import description, get_target
from einc.targets.clike import CLikeTarget
from einc.targets.descriptions import TargetDescription


@dataclass(frozen=True)
class TargetedPass(ModulePass, ABC):
    """A pass reading the facts of the target it is bound to (`bound`), else of the target
    its `target` option (or `default_target`) names."""

    bound: type[CLikeTarget] | None = field(default=None, init=False, compare=False, repr=False)
    """The target the compiler handed over (`for_target`); not a pipeline option."""

    default_target: ClassVar[str] = ""
    """The target of a pass without a `target` option that nobody bound."""

    def target_name(self) -> str:
        """The name of the target whose facts the pass reads."""
        if self.bound is not None:
            return self.bound.name
        option = getattr(self, "target", None)
        return option if isinstance(option, str) else self.default_target

    def for_target(self, target: type[CLikeTarget]) -> Self:
        """This pass bound to `target` (its `target` option, if it has one, names it too, so the
        pass prints as the same pipeline text)."""
        names = {f.name for f in dataclasses.fields(self) if f.init}
        bound = dataclasses.replace(self, **({"target": target.name} if "target" in names else {}))
        object.__setattr__(bound, "bound", target)
        return bound

    def target_facts(self) -> type[CLikeTarget]:
        """The bound target, else the registered target the option names (TargetError)."""
        return self.bound if self.bound is not None else get_target(self.target_name())

    def limits(self) -> TargetDescription:
        """The target's launch limits and dtypes; a TargetError for a target without them (C)
        or a name no target has."""
        if self.bound is not None and self.bound.limits is not None:
            return self.bound.limits
        return description(self.target_name())


def bind_target(passes: Iterable[ModulePass], target: type[CLikeTarget]) -> tuple[ModulePass, ...]:
    """`passes` with each TargetedPass bound to `target` (the others as they are)."""
    return tuple(p.for_target(target) if isinstance(p, TargetedPass) else p for p in passes)
