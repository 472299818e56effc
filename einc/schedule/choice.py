"""Which schedule a compilation applies, said once and typed: the API's `schedule=` argument,
`--schedule`, a service request and the tuner's candidates all become a ScheduleChoice, and
the compiler reads nothing else.

    ScheduleChoice.BEST       the best tuning record for the program on this device, else the
                              target's default schedule (`schedule=None`, no --schedule)
    ScheduleChoice.DEFAULT    the target's default schedule, never a record (`"default"`)
    ScheduleChoice.NONE       no schedule: the loops as they are (`"none"`)
    ScheduleChoice.given(s)   a Schedule (a file's, script text, or built in memory)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from xdsl.dialects.builtin import ModuleOp

from einc.errors import ScheduleError, SourceLocation
from einc.schedule.script import Schedule

if TYPE_CHECKING:
    from einc.targets.clike import CLikeTarget


class Kind(enum.Enum):
    BEST = "best"
    DEFAULT = "default"
    NONE = "none"
    GIVEN = "given"


@dataclass(frozen=True)
class ScheduleChoice:
    """One of BEST, DEFAULT, NONE, or a given schedule: a Schedule, or script text parsed when
    the schedule is applied (so that its errors come from the `scheduled` stage, located in the
    text named `filename`)."""

    kind: Kind
    schedule: Schedule | None = None
    text: str | None = None
    filename: str = "<schedule>"

    BEST: ClassVar[ScheduleChoice]
    DEFAULT: ClassVar[ScheduleChoice]
    NONE: ClassVar[ScheduleChoice]
    WORDS: ClassVar[tuple[str, ...]] = ("none", "default")
    """The choices a `--schedule` argument or a `schedule=` text may name by a word."""

    @classmethod
    def given(cls, schedule: Schedule) -> ScheduleChoice:
        return cls(Kind.GIVEN, schedule=schedule)

    @classmethod
    def of(cls, value: object, filename: str = "<schedule>") -> ScheduleChoice:
        """The API's `schedule=` argument: None (BEST), a ScheduleChoice, a Schedule, "none",
        "default", or script text; anything else is a ScheduleError."""
        if value is None:
            return cls.BEST
        if isinstance(value, ScheduleChoice):
            return value
        if isinstance(value, Schedule):
            return cls.given(value)
        if isinstance(value, str):
            word = value.strip()
            if word in cls.WORDS:
                return cls.NONE if word == "none" else cls.DEFAULT
            return cls(Kind.GIVEN, text=value, filename=filename)
        raise ScheduleError(
            f"schedule= takes a Schedule, the text of a schedule script or 'none', "
            f"not {type(value).__name__} ({value!r:.40})",
            SourceLocation("<schedule argument>", 1, 1),
        )

    @classmethod
    def read(cls, path: str | None) -> ScheduleChoice:
        """`--schedule PATH`: the file's schedule (parsed, located at its ops), `none`,
        `default`, or BEST without one."""
        if path is None:
            return cls.BEST
        if path in cls.WORDS:
            return cls.NONE if path == "none" else cls.DEFAULT
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise ScheduleError(f"cannot read schedule: {err}", SourceLocation(path, 1, 1)) from None
        return cls.given(Schedule.parse(text, path))

    @property
    def takes_records(self) -> bool:
        """Whether the best tuning record, when there is one, comes first."""
        return self.kind is Kind.BEST

    def resolve(self, target: type[CLikeTarget], loops: ModuleOp) -> Schedule | None:
        """The schedule to apply to the loops when no tuning record is: the given one (its
        text parsed now), the target's default one, or None (NONE)."""
        if self.kind is Kind.NONE:
            return None
        if self.kind is not Kind.GIVEN:
            from einc.schedule.default import default_schedule  # policies load only when asked

            return default_schedule(target, loops)
        if self.schedule is not None:
            return self.schedule
        assert self.text is not None
        return Schedule.parse(self.text, self.filename)

    def __str__(self) -> str:
        """How the choice was written (for reproducers): the word, or the script."""
        if self.kind is not Kind.GIVEN:
            return self.kind.value
        return str(self.schedule) if self.schedule is not None else str(self.text)


ScheduleChoice.BEST = ScheduleChoice(Kind.BEST)
ScheduleChoice.DEFAULT = ScheduleChoice(Kind.DEFAULT)
ScheduleChoice.NONE = ScheduleChoice(Kind.NONE)
