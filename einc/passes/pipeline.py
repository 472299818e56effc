"""Pipeline texts (`a,b{opt=1}`) made into passes, with every mistake a located UsageError:
an unknown pass (with the closest names), an option the pass does not have, a value of the
wrong type, each at its column of the text. The passes available are given by the caller
(einc.compiler.registry.get_all_passes(), or a schedule interpreter's own); nothing here
fetches a registry."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import get_type_hints

from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError
from xdsl.utils.hints import type_repr

from einc.errors import SourceLocation, UsageError

LOOPS_PIPELINE = "convert-ein-to-affine,einc-split-index-axes"
"""The `loops` stage: `ein` to affine loops on memrefs (before a schedule and any target's
`pipeline`)."""

PassFactories = Mapping[str, Callable[[], type[ModulePass]]]
"""Pass name -> a function returning the pass class (a registry, imported on demand)."""


def parse_passes(spec: str, available: PassFactories, label: str = "pass-pipeline") -> tuple[ModulePass, ...]:
    """The passes of the pipeline text `spec` (an MLIR-style `builtin.module(...)` wrapper
    is accepted). A malformed text, an unknown pass (with the closest names), an option the
    pass does not have, or a value of the wrong type: a UsageError at that place in `spec`,
    the file name `label` (`pass-pipeline:1:12: error: ...`)."""
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


def place(spec: str, word: str, after: int = 0) -> tuple[int, int]:
    """The column and length of `word` (a whole name) in `spec`, from `after` on."""
    found = re.compile(rf"(?<![\w.-]){re.escape(word)}(?![\w.-])").search(spec, after)
    return (found.start() + 1, len(word)) if found else (1, max(1, len(spec)))


def _make_pass(
    arg: ArgSpec, available: PassFactories, spec: str, label: str
) -> ModulePass:
    def error(message: str, word: str, after: int = 0) -> UsageError:
        col, length = place(spec, word, after)
        return UsageError(message, SourceLocation(label, 1, col, length, spec))

    if arg.name not in available:
        raise error(
            f"unknown pass '{arg.name}'{did_you_mean(arg.name, available)} "
            "(einc-opt --list-passes lists them)", arg.name,
        )  # fmt: skip
    cls = available[arg.name]()
    at = place(spec, arg.name)[0] - 1
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
        made = cls.from_pass_spec(arg)
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
        named = option_named(str(err), list(options))  # the pass refused a value (__post_init__)
        if named is not None:
            where = PassPlace(spec, label, at)
            raise UsageError(f"pass '{arg.name}' option '{named}': {err}", where.option(named)) from None
        raise error(f"pass '{arg.name}': {err}", arg.name) from None
    object.__setattr__(made, PassPlace.ATTRIBUTE, PassPlace(spec, label, at))  # frozen: not a field
    return made


@dataclass(frozen=True)
class PassPlace:
    """Where a pass instance was written: the pipeline text, its label (the file name of
    errors) and the offset of the pass's name in it; kept on the instance (`ATTRIBUTE`) so
    that a value the pass refuses only when it runs is still shown at its option."""

    spec: str
    label: str
    at: int
    ATTRIBUTE = "einc_pass_place"

    def _written(self, name: str) -> re.Match[str] | None:
        """`name=value` of this pass in the text (the option's `-` or `_` spelling)."""
        braces = re.match(r"[\w.-]+\{([^}]*)\}", self.spec[self.at :])
        if braces is None:
            return None
        spelled = "|".join(re.escape(n) for n in {name, name.replace("_", "-")})
        return re.compile(rf"(?<![\w-])(?:{spelled})\s*=\s*(?:\"[^\"]*\"|[^\s,}}]*)").search(
            self.spec, self.at + braces.start(1), self.at + braces.end(1))

    def writes(self, name: str) -> bool:
        """Whether the text gives option `name` a value (else the pass's default holds)."""
        return self._written(name) is not None

    def option(self, name: str) -> SourceLocation:
        """The place of option `name=value` in the text, else of the pass's name."""
        found = self._written(name)
        if found is None:
            col, length = place(self.spec, self.spec[self.at :].split("{")[0], self.at)
            return SourceLocation(self.label, 1, col, length, self.spec)
        return SourceLocation(self.label, 1, found.start() + 1, found.end() - found.start(), self.spec)

    @classmethod
    def of(cls, p: ModulePass) -> PassPlace | None:
        place = getattr(p, cls.ATTRIBUTE, None)
        return place if isinstance(place, PassPlace) else None


def option_named(message: str, options: list[str]) -> str | None:
    """The option of a pass that `message` (a pass's ValueError) names, as a whole word
    (`factor`, or `tile-size` for `tile_size`); None when it names none or several."""
    named = [o for o in options if re.search(rf"(?<![\w-])({re.escape(o)}|{re.escape(o.replace('_', '-'))})(?![\w-])", message)]
    return named[0] if len(named) == 1 else None
