"""A whole program as tasks: the kernels its default schedule produces (the loop nests left at
the top of the kernel function, a nest with the statements fused into it), each a program of
its own with canonical tensor names, so that two kernels computing the same thing on tensors
of the same shapes (a transformer's Q, K and V projections) are one task, tuned once and
recorded once (`program_key` of the task's normalised program).

    scheduled = comp.module("scheduled")      # comp: a Compilation with the default schedule
    tasks = split_program(comp.program, scheduled)
    tasks[0].source                           # "input in0: float32[64, 784] ...\nt0[N, M] +=! ..."
    tasks[0].statements                       # ("data_0",): the whole program's statements
    merged = merge_schedules(comp.module("loops"), [(task, record.schedule), ...])

A task's schedule (a tuning record's, or the task's own default schedule) is written in the
task's names; `merge_schedules` renames its statements, tensors and knobs to the whole
program's and joins the tasks' scripts into one, which applies to the whole program's loops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from xdsl.dialects import affine, func, memref, transform
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue

from einc.dialects import einc_transform as et
from einc.errors import ScheduleError, SourceLocation
from einc.frontend import ast
from einc.transforms.loop_analysis import buffer_name

if TYPE_CHECKING:
    from einc.frontend import Program
    from einc.schedule.script import Schedule

STMT_ATTR = "einc.stmt"
TASK_SCHEDULE = "<tuning records>"
"""The filename of a schedule merged from the tasks' (errors point into its text)."""


@dataclass(frozen=True)
class ProgramTask:
    """One kernel of a whole program as a program of its own.

    statements  the whole program's statements it computes (their output names), in order
    source      the task's program: its inputs declared, its statements with canonical tensor
                names (`in0, in1, ...` read, `t0, t1, ...` written; axes keep theirs)
    names       canonical name -> the whole program's tensor name
    results     the canonical names of its results (read by later tasks, or the program's)"""

    index: int
    statements: tuple[str, ...]
    source: str
    names: tuple[tuple[str, str], ...]
    results: tuple[str, ...]

    @property
    def body(self) -> str:
        """The source without its first line (the comment naming the task and its statements):
        the same for identical kernels."""
        return self.source.split("\n", 1)[1]

    @property
    def rename(self) -> dict[str, str]:
        return dict(self.names)

    def describe(self) -> str:
        """`data_0, data_1` (the statements it computes)."""
        return ", ".join(self.statements)


def kernel_groups(scheduled: ModuleOp) -> list[list[str]]:
    """The statements of each loop nest at the top of the kernel function of a scheduled
    module (nests sharing a statement, such as a reduction's initialisation and its loop, are
    one group), in order of their first nest."""
    groups: list[list[str]] = []
    for f in scheduled.walk():
        if not isinstance(f, func.FuncOp) or not f.body.blocks:
            continue
        for top in f.body.block.ops:
            stmts = list(dict.fromkeys(_stmts(top)))
            if not stmts:
                continue
            joined = [i for i, g in enumerate(groups) if set(g) & set(stmts)]
            merged = list(dict.fromkeys([*(s for i in joined for s in groups[i]), *stmts]))
            at = joined[0] if joined else len(groups)
            groups = [g for i, g in enumerate(groups) if i not in joined]
            groups.insert(at, merged)
    return groups


def _stmts(op: Operation) -> Iterator[str]:
    for inner in op.walk():
        if isinstance(inner, affine.ForOp) and isinstance(tag := inner.attributes.get(STMT_ATTR), StringAttr):
            yield tag.data


def split_program(program: Program, scheduled: ModuleOp) -> list[ProgramTask]:
    """The tasks of `program`: one per kernel of `scheduled`, its loops with a schedule
    applied (the target's default one: the kernels a compile without records makes), in the
    program's order; a statement no nest computes (none: every statement has loops) would be
    a task of its own. A program with a scatter (`=.`, `+=.`: a statement updating a tensor
    that later statements read by the same name) is not split: [] (it is tuned whole)."""
    if any(s.scatter is not None for s in program.statements):
        return []
    order = {s.output.name: i for i, s in enumerate(program.statements)}
    groups = [[s for s in g if s in order] for g in kernel_groups(scheduled)]
    groups = [sorted(g, key=order.__getitem__) for g in groups if g]
    covered = {s for g in groups for s in g}
    groups += [[s.output.name] for s in program.statements if s.output.name not in covered]
    groups.sort(key=lambda g: order[g[0]])
    reads = {s.output.name: {a.tensor for a in _accesses(s.syntax.expr)} for s in program.statements}
    return [task_of(program, group, i, reads) for i, group in enumerate(groups)]


def task_of(program: Program, group: Sequence[str], index: int,
            reads: dict[str, set[str]] | None = None) -> ProgramTask:  # fmt: skip
    """The task computing `group` (statement names, in the program's order) of `program`;
    `reads`: each statement's tensors read (found here when not given)."""
    if reads is None:
        reads = {s.output.name: {a.tensor for a in _accesses(s.syntax.expr)} for s in program.statements}
    infos = {t.name: t for t in program.inputs}
    infos.update({s.output.name: s.output for s in program.statements})
    statements = [s for s in program.statements if s.output.name in group]
    inside = set(group)
    names: dict[str, str] = {}  # original -> canonical
    inputs: list[str] = []
    lines: list[str] = []
    for stmt in statements:
        syntax = stmt.syntax
        edits: list[tuple[int, int, str]] = []
        for access in _accesses(syntax.expr):
            if access.tensor not in names:
                names[access.tensor] = f"in{len(inputs)}"
                inputs.append(access.tensor)
            edits.append((access.tensor_span.start, access.tensor_span.end, names[access.tensor]))
        if syntax.output not in names:
            names[syntax.output] = f"t{sum(1 for v in names.values() if v.startswith('t'))}"
        edits.append((syntax.output_span.start, syntax.output_span.end, names[syntax.output]))
        start, end = syntax.span.start, syntax.span.end
        text = program.source
        pieces: list[str] = []
        at = start
        for a, b, new in sorted(edits):
            pieces += [text[at:a], new]
            at = b
        pieces.append(text[at:end])
        lines.append(" ".join("".join(pieces).split()))
    read_outside = {t for stmt, tensors in reads.items() if stmt not in inside for t in tensors}
    wanted = {t.name for t in program.outputs}
    results = [names[s.output.name] for s in statements if s.output.name in read_outside | wanted]
    last = names[statements[-1].output.name]
    results = list(dict.fromkeys([*results, last]))
    decls: list[str] = []
    for name in inputs:
        info = infos[name]
        decls.append(f"input {names[name]}: {info.dtype}[{', '.join(str(d) for d in info.shape)}]")
    extra = [r for r in results if r != last]
    head = [f"# task {index} of {program.filename}: {', '.join(group)}"]
    text = "\n".join([*head, *decls, *([f"output {', '.join(results)}"] if extra else []), *lines]) + "\n"
    canonical = tuple((new, old) for old, new in names.items())
    return ProgramTask(index, tuple(group), text, canonical, tuple(results))


def _accesses(node: object) -> Iterator[ast.Access]:
    """The tensor accesses of an expression tree (pre-order, so in the order of the text)."""
    if isinstance(node, ast.Access):
        yield node
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            yield from _children(getattr(node, f.name))
    elif isinstance(node, tuple):
        for item in cast("tuple[object, ...]", node):
            yield from _accesses(item)


def _children(value: object) -> Iterator[ast.Access]:
    if isinstance(value, tuple) and not isinstance(value, ast.Span):
        for item in cast("tuple[object, ...]", value):
            yield from _accesses(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield from _accesses(value)


# ---- schedules ---------------------------------------------------------------------------------
def buffer_names(loops: ModuleOp) -> dict[str, str]:
    """Each tensor of a loop module (its `ein.name`) -> the name schedules' cache ops give
    it (`loop_analysis.buffer_name`: an argument's value name, an allocation's tensor name)."""
    found: dict[str, str] = {}
    for op in loops.walk():
        if isinstance(op, func.FuncOp) and op.arg_attrs is not None and op.body.blocks:
            for arg, attrs in zip(op.body.block.args, op.arg_attrs.data):
                name = attrs.data.get("ein.name")
                if isinstance(name, StringAttr):
                    found[name.data] = buffer_name(arg)
        elif isinstance(op, memref.AllocOp) and isinstance(name := op.attributes.get("ein.name"), StringAttr):
            found[name.data] = buffer_name(op.memref)
    return found


def merge_schedules(loops: ModuleOp, parts: Sequence[tuple[ProgramTask, str]]) -> Schedule:
    """One schedule for the whole program whose loops are `loops`: each task's schedule
    (text, in the task's names; "" for a task nothing schedules) renamed to the program's
    statements, tensors and knobs, the tasks' ops one after the other. A ScheduleError when a
    part does not parse or names what its task does not have."""
    from einc.schedule.script import Schedule

    where = SourceLocation(TASK_SCHEDULE, 1, 1)
    whole = buffer_names(loops)
    base: ModuleOp | None = None
    entry: transform.NamedSequenceOp | None = None
    for task, text in parts:
        if not text.strip():  # a task nothing schedules (no default schedule: its loops as they are)
            continue
        part = Schedule.parse(text, f"<task {task.index} schedule>")
        module = part.module.clone()
        rename = task.rename
        for op in module.walk():
            if isinstance(op, et.MatchOp) and op.stmt is not None:
                if op.stmt.data not in rename:
                    raise ScheduleError(f"task {task.index}'s schedule matches statement '{op.stmt.data}', "
                                        "which the task does not have", where)  # fmt: skip
                op.stmt = StringAttr(rename[op.stmt.data])
            elif isinstance(op, et.CacheOp):
                old = rename.get(op.tensor.data)
                if old is None or old not in whole:
                    raise ScheduleError(f"task {task.index}'s schedule stages tensor '{op.tensor.data}', "
                                        "which the task does not have", where)  # fmt: skip
                op.tensor = StringAttr(whole[old])
            elif isinstance(op, et.KnobOp):
                stmt, dot, rest = op.knob_name.data.partition(".")
                name = f"{rename[stmt]}.{rest}" if dot and stmt in rename else f"task{task.index}.{op.knob_name.data}"
                op.knob_name = StringAttr(name)
        sequence = _entry(module)
        if base is None:
            base, entry = module, sequence
            continue
        assert entry is not None
        # op.clone adds each clone's results to the mapping, for the ops after it
        mapping: dict[SSAValue, SSAValue] = {sequence.body.block.args[0]: entry.body.block.args[0]}
        terminator = entry.body.block.last_op
        assert terminator is not None
        for op in list(sequence.body.block.ops):
            if isinstance(op, transform.YieldOp):
                continue
            entry.body.block.insert_op_before(op.clone(value_mapper=mapping), terminator)
    if base is None:  # no task has a schedule: the script that does nothing
        return Schedule.parse(EMPTY, TASK_SCHEDULE)
    return Schedule.parse(str(base), TASK_SCHEDULE)


EMPTY = """builtin.module {
  transform.named_sequence @__transform_main(%0: !transform.any_op) {
    transform.yield
  }
}
"""


def _entry(module: ModuleOp) -> transform.NamedSequenceOp:
    for op in module.walk():
        if isinstance(op, transform.NamedSequenceOp):
            return op
    raise ScheduleError("a task schedule without an entry point", SourceLocation(TASK_SCHEDULE, 1, 1))
