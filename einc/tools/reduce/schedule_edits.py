"""The reducer's edits of a schedule, on its text: the top-level ops of
`@__transform_main` (one per line, or a line opening a region and its lines) dropped, and the
integers they are given (`tile %l by 32`, a knob's value) lowered.

    ops = schedule_ops(text)                    # [ScheduleOp(first, last, defines, uses), ...]
    without(text, ops, drop={2, 5})             # those ops and every op using their handles
    size_edits(text)                            # texts with one integer lowered
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass

_ENTRY = re.compile(r"transform\.named_sequence\s+@__transform_main\b")
_VALUE = re.compile(r"%[\w.$-]+")


@dataclass(frozen=True)
class ScheduleOp:
    """A top-level op of the entry: its lines (`first` to `last`, 0-based), the handles it
    defines and the ones it uses."""

    first: int
    last: int
    defines: frozenset[str]
    uses: frozenset[str]
    text: str


def schedule_ops(text: str) -> list[ScheduleOp]:
    """The top-level ops of `@__transform_main` but its `transform.yield`, in order."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _ENTRY.search(line)), None)
    if start is None:
        return []
    ops: list[ScheduleOp] = []
    i = start + 1
    while i < len(lines):
        line = lines[i].split("//")[0]
        stripped = line.strip()
        if stripped.startswith("}"):
            break
        if not stripped:
            i += 1
            continue
        first, depth = i, line.count("{") - line.count("}")
        while depth > 0 and i + 1 < len(lines):
            i += 1
            depth += lines[i].count("{") - lines[i].count("}")
        body = "\n".join(lines[first : i + 1])
        head, equal, rest = body.partition(" = ")
        defines = frozenset(_VALUE.findall(head)) if equal and head.strip().startswith("%") else frozenset()
        uses = frozenset(_VALUE.findall(rest if defines else body)) - defines
        if not stripped.startswith("transform.yield"):
            ops.append(ScheduleOp(first, i, defines, uses, body))
        i += 1
    return ops


def closure(ops: Sequence[ScheduleOp], drop: Set[int]) -> set[int]:
    """`drop` and every op that uses a handle a dropped op defines (transitively)."""
    dropped = set(drop)
    gone = set().union(*(ops[i].defines for i in dropped)) if dropped else set()
    for index, op in enumerate(ops):
        if index not in dropped and op.uses & gone:
            dropped.add(index)
            gone |= op.defines
    return dropped


def without(text: str, ops: Sequence[ScheduleOp], drop: Set[int]) -> str:
    """The schedule with the ops `drop` (and those using their handles) removed."""
    removed = closure(ops, drop)
    skip = {line for i in removed for line in range(ops[i].first, ops[i].last + 1)}
    lines = text.splitlines()
    return "\n".join(line for n, line in enumerate(lines) if n not in skip) + "\n"


_SIZE = re.compile(r"\bby\s+(\d+)\b")
_KNOB = re.compile(r"=\s*(\d+)\s+from\s+\[([\d,\s]*)\]")


def size_edits(text: str) -> Iterator[str]:
    """Schedules with one size lowered: `by N` (tile, peel, unroll, rfactor) to 1, 2, N/2;
    a knob's value (`= N from [...]`) to a smaller one (its options made just that one)."""
    for op in schedule_ops(text):
        lines = text.splitlines()
        line = lines[op.first]
        for found in _SIZE.finditer(line):
            value = int(found.group(1))
            for smaller in _smaller(value):
                new = line[: found.start(1)] + str(smaller) + line[found.end(1) :]
                yield "\n".join([*lines[: op.first], new, *lines[op.first + 1 :]]) + "\n"
        for found in _KNOB.finditer(line):
            value = int(found.group(1))
            for smaller in _smaller(value):
                new = line[: found.start()] + f"= {smaller} from [{smaller}]" + line[found.end() :]
                yield "\n".join([*lines[: op.first], new, *lines[op.first + 1 :]]) + "\n"


def _smaller(value: int) -> list[int]:
    return sorted({v for v in (1, 2, value // 2) if 0 < v < value})


def count_ops(text: str | None) -> int:
    """A schedule's ops (its entry's top-level ops but the yield); 0 without a schedule."""
    return 0 if text is None else len(schedule_ops(text))


def _ordered(text: str) -> list[str]:
    seen: list[str] = []
    for value in _VALUE.findall(text):
        if value not in seen:
            seen.append(value)
    return seen


def _substitute(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pattern = re.compile("|".join(re.escape(k) + r"(?![\w.$-])" for k in sorted(mapping, key=len, reverse=True)))
    return pattern.sub(lambda m: mapping[m.group(0)], text)


def bypass_edits(text: str) -> Iterator[str]:
    """Schedules with one op taken out and its handles' users given what it was given: a
    reorder's loops in their old order, a tile's (or peel's, unroll's) loop untouched, a
    knob's value written where it is used."""
    ops = schedule_ops(text)
    lines = text.splitlines()
    for op in ops:
        head, equal, rest = op.text.partition(" = ")
        results = _ordered(head) if op.defines else []
        operands = _ordered(rest if op.defines else op.text)
        mapping: dict[str, str] = {}
        knob = _KNOB.search(op.text)
        if knob is not None and results:
            mapping = {results[0]: knob.group(1)}
        elif results and len(results) == len(operands):
            mapping = dict(zip(results, operands, strict=True))
        elif results and operands:
            mapping = dict.fromkeys(results, operands[0])
        else:
            continue
        kept = [line for n, line in enumerate(lines) if not op.first <= n <= op.last]
        yield _substitute("\n".join(kept), mapping) + "\n"


def without_statements(text: str, names: Set[str]) -> str:
    """The schedule without the ops that match a statement of `names` (`match stmt "x"`,
    `cache_read "x"` ...) and the ops using their handles."""
    ops = schedule_ops(text)
    drop = {i for i, op in enumerate(ops) if any(f'"{name}"' in op.text for name in names)}
    return without(text, ops, drop) if drop else text
