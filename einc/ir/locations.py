"""Source locations on ops: where in the `.ein` text (and in the schedule) an op comes from.

The frontend puts a `loc("prog.ein":3:1)` (xDSL's `FileLineColLoc`) on every op it builds
from a statement: the einsum at the statement, its body's ops at their sub-expression. The
passes keep them without each `create` saying so:

- a clone keeps its original's location (xDSL);
- `Located(pattern)`: the ops a rewrite pattern makes take the location of the op it rewrites;
- after every pass of a pipeline (`keeping_locations`) and after every transform op of a
  schedule (`Watch`, over the ops it was given), `fill_locations` gives each op still at
  `loc(unknown)` the location of what it was made from. An op with regions (a new loop, an
  outlined kernel): the statement of the first located op inside it, else the nearest
  located enclosing op (not the host `func.func`, which stands for the whole program). An
  op without: the first located user of its results (a hoisted constant, a buffer), else
  its operands' defining op, else the enclosing op. Then the nearest located neighbour;
- an op a schedule op made (new, or a clone) carries `fused[statement loc, schedule op loc]`
  (`derived_from`), so it names both.

`statement_location` and `schedule_locations` read them back as `einc.errors.SourceLocation`s
for errors raised in passes and printers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    IntAttr,
    LocationAttr,
    ModuleOp,
    NameLoc,
    NoneAttr,
    StringAttr,
    UnknownLoc,
)
from xdsl.ir import Attribute, Block, Operation
from xdsl.passes import ModulePass, PassPipeline
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from einc.errors import EincError, InternalCompilerError, SourceLocation

__all__ = [
    "Located",
    "Watch",
    "at_op",
    "derived_from",
    "file_location",
    "fill_locations",
    "has_location",
    "keeping_locations",
    "schedule_locations",
    "snapshot",
    "stamp",
    "statement_location",
    "tag",
]


def file_location(loc: SourceLocation) -> FileLineColLoc:
    """`loc` as xDSL's `loc("file":line:col)`."""
    return FileLineColLoc(StringAttr(loc.file), IntAttr(loc.line), IntAttr(loc.col))


def has_location(op: Operation) -> bool:
    return type(op.location) is not UnknownLoc


def _file_locations(attr: Attribute) -> Iterator[FileLineColLoc]:
    """The file locations in `attr`, depth first (a fused location's in its order; a call
    site's callee first)."""
    match attr:
        case FileLineColLoc():
            yield attr
        case FusedLoc(locations=ArrayAttr() as inner):
            for loc in inner.data:
                yield from _file_locations(loc)
        case CallSiteLoc(callee=callee, caller=caller):
            yield from _file_locations(callee)
            yield from _file_locations(caller)
        case NameLoc(location=inner) if not isinstance(inner, NoneAttr):
            yield from _file_locations(inner)
        case _:
            return


def _source(loc: FileLineColLoc, sources: dict[str, str] | None) -> SourceLocation:
    """`loc` as a SourceLocation; with its file's text, spanning the word it starts (a
    statement's output name, a schedule op's name) for the caret."""
    file, line, col = loc.filename.data, loc.line.data, loc.column.data
    text = (sources or {}).get(file)
    length = 1
    if text is not None:
        lines = text.splitlines()
        if 0 < line <= len(lines):
            word = re.match(r"[\w.]+", lines[line - 1][col - 1 :])
            length = max(1, len(word.group())) if word else 1
    return SourceLocation(file, line, col, length, text)


def statement_location(attr: Attribute, sources: dict[str, str] | None = None) -> SourceLocation | None:
    """The first file location in `attr` (the statement an op comes from), with its source
    text when `sources` (file name -> text) has it; None for `loc(unknown)`."""
    first = next(_file_locations(attr), None)
    return None if first is None else _source(first, sources)


def schedule_locations(attr: Attribute, sources: dict[str, str] | None = None) -> list[SourceLocation]:
    """The file locations after the first (the schedule ops that made the op), in order."""
    return [_source(loc, sources) for loc in list(_file_locations(attr))[1:]]


def at_op(attr: Attribute, sources: dict[str, str] | None = None) -> tuple[SourceLocation | None, tuple[tuple[SourceLocation, str], ...]]:
    """Where an error about an op at `attr` goes: its statement, and a note at each schedule
    op that made it (`EincError(message, at_op(op.location))`, or spread: `*at_op(...)`)."""
    notes = tuple((loc, "in the code this schedule op made") for loc in schedule_locations(attr, sources))
    return statement_location(attr, sources), notes


def tag(exc: BaseException, op: Operation) -> None:
    """Record where `exc` was raised: the location of `op`, the op being rewritten or printed
    (the innermost one: the first tag stays). An EincError without a location takes it (and
    the schedule ops' notes); any other exception keeps it as `einc_location`, which an
    InternalCompilerError's reproducer reports."""
    if not has_location(op) or getattr(exc, "einc_location", None) is not None:
        return
    loc, notes = at_op(op.location)
    if loc is None:
        return
    where = str(loc) + "".join(f" (in the code {n} made)" for n, _ in notes)
    where = f"{where}, at {op.name}"
    setattr(exc, "einc_location", where)
    if isinstance(exc, EincError) and exc.loc is None:
        exc.loc, exc.notes = loc, notes
    if isinstance(exc, InternalCompilerError):
        exc.add_context(location=where)


def derived_from(base: LocationAttr, by: LocationAttr) -> LocationAttr:
    """`base` as made by the op at `by`: `fused[base..., by]` (flat, `by` not repeated)."""
    if isinstance(by, UnknownLoc):
        return base
    inner = base.locations if isinstance(base, FusedLoc) else None
    parts: list[Attribute] = list(inner.data) if isinstance(inner, ArrayAttr) else [base]
    parts = [p for p in parts if not isinstance(p, UnknownLoc)]
    if by in parts:
        return base
    return FusedLoc(ArrayAttr([*parts, by]), NoneAttr())


# ---- keeping them ---------------------------------------------------------------------------

_PROGRAM_OPS = (ModuleOp, func.FuncOp)
"""Ops that stand for the whole program, not a statement: nothing inherits their location."""


Context = dict[Operation, LocationAttr | None]
"""Each op of a module before a change -> the location of its nearest located enclosing op
(the statement an einsum body's op belongs to), else its own (None: neither)."""


def _enclosing(op: Operation) -> LocationAttr | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, ModuleOp):
        if not isinstance(parent, func.FuncOp) and has_location(parent):
            return parent.location
        parent = parent.parent_op()
    return None


def snapshot(root: Operation) -> Context:
    """`Context` of every op under `root`, taken before a change (its keys: the ops there
    were): an op the change moves into a new op (a loop around it, a kernel) gives the new
    op its statement's location."""
    context: Context = {}
    # preorder over xDSL's links (not nested `walk` generators: taken before every pass)
    stack: list[tuple[Operation, LocationAttr | None]] = [(root, _enclosing(root))]
    while stack:
        op, enclosing = stack.pop()
        own = op.location if has_location(op) else None
        context[op] = enclosing or own
        inner = enclosing if isinstance(op, _PROGRAM_OPS) or own is None else own
        children: list[tuple[Operation, LocationAttr | None]] = []
        for region in op.regions:
            block = region._first_block
            while block is not None:
                child = block._first_op
                while child is not None:
                    children.append((child, inner))
                    child = child._next_op
                block = block._next_block
        stack.extend(reversed(children))
    return context


def _from_ancestors(op: Operation, context: Context) -> LocationAttr | None:
    return _enclosing(op)


def _from_inside(op: Operation, context: Context) -> LocationAttr | None:
    for inner in op.walk():
        if inner is not op and has_location(inner):
            return context.get(inner) or inner.location
    return None


def _from_users(op: Operation, context: Context) -> LocationAttr | None:
    for result in op.results:
        for use in result.uses:
            if has_location(use.operation):
                return use.operation.location
    return None


def _from_operands(op: Operation, context: Context) -> LocationAttr | None:
    for operand in op.operands:
        owner = operand.owner
        if isinstance(owner, Operation) and has_location(owner):
            return owner.location
    return None


def _from_neighbours(op: Operation, context: Context) -> LocationAttr | None:
    after, before = op.next_op, op.prev_op
    while after is not None or before is not None:
        for other in (after, before):
            if other is not None and has_location(other) and not isinstance(other, _PROGRAM_OPS):
                return other.location
        after = after.next_op if after is not None else None
        before = before.prev_op if before is not None else None
    return None


Rule = Callable[[Operation, Context], LocationAttr | None]
_NEST_RULES: Sequence[Rule] = (_from_inside, _from_ancestors, _from_users, _from_operands, _from_neighbours)
"""An op with regions (a loop, a kernel) comes from what it holds, else where it stands."""
_LEAF_RULES: Sequence[Rule] = (_from_users, _from_operands, _from_ancestors, _from_neighbours)
"""An op without comes from the statement its values flow in (a producer's load moved into a
consumer's loop by compute_at is the producer's), else where it stands."""


def fill_locations(
    root: Operation | Sequence[Operation], context: Context | None = None,
    wrap: Callable[[LocationAttr], LocationAttr] | None = None,
) -> int:
    """Give each op under `root` (an op, or several) at `loc(unknown)` (the host function
    and module excepted) the location of what it was made from, `context` being the
    `snapshot` taken before the change: the rules of the module docstring, the first ones
    repeated until they locate nothing more before a later one is tried. A found location
    passes through `wrap` when given. Returns how many ops it located; a module with no
    location is left as it is."""
    roots = [root] if isinstance(root, Operation) else list(root)
    pending: list[Operation] = []
    located = False
    for op in _all_ops(roots) or ():  # every op, preorder (as `walk`), through xDSL's links
        if has_location(op):
            located = True
        elif not isinstance(op, _PROGRAM_OPS):
            pending.append(op)
    if not pending or not (located or any(has_location(op) for op in _outermost(roots[0]).walk())):
        return 0
    return _fill(pending, context or {}, wrap)


def _fill(pending: list[Operation], context: Context, wrap: Callable[[LocationAttr], LocationAttr] | None) -> int:
    """`fill_locations` of the ops `pending` (at `loc(unknown)`, none the host function)."""
    pending = [op for op in pending if not isinstance(op, _PROGRAM_OPS)]
    filled = 0
    for level in range(1, len(_NEST_RULES) + 1):
        while pending:
            still: list[Operation] = []
            for op in pending:
                rules = (_NEST_RULES if op.regions else _LEAF_RULES)[:level]
                found = next((loc for rule in rules if (loc := rule(op, context)) is not None), None)
                if found is None:
                    still.append(op)
                else:
                    op.location = wrap(found) if wrap is not None else found
            if len(still) == len(pending):
                break
            filled += len(pending) - len(still)
            pending = still
    return filled


def _outermost(op: Operation) -> Operation:
    while (parent := op.parent_op()) is not None:
        op = parent
    return op


WATCH_LIMIT = 300
"""The most ops one transform op's `Watch` holds. Past it (a consumer loop that compute_at
grew to hold a long chain of statements), the ops that transform op makes are located after
the schedule, at their statement only: keeping locations stays linear in the module."""


def _all_ops(tops: Sequence[Operation], limit: int | None = None) -> list[Operation] | None:
    """Every op under `tops` (preorder), or None when there are more than `limit` (known as
    soon as that many are found or waiting: a loop whose body holds a long fused chain is not
    gone through to say so). A loop over xDSL's links rather than its nested `walk`
    generators: a schedule runs it per transform op."""
    found: list[Operation] = []
    stack = list(reversed(tops))
    while stack:
        op = stack.pop()
        found.append(op)
        if limit is not None and len(found) > limit:
            return None
        inner: list[Operation] = []
        for region in op.regions:
            block = region._first_block
            while block is not None:
                child = block._first_op
                while child is not None:
                    inner.append(child)
                    if limit is not None and len(found) + len(stack) + len(inner) > limit:
                        return None  # each of them is an op under `tops`
                    child = child._next_op
                block = block._next_block
        stack.extend(reversed(inner))
    return found


@dataclass
class Watch:
    """The ops a change to `targets` may make or clone: those between each target's
    neighbours in its block that the change keeps (a loop wrapped, split, staged or fused in
    place), or the whole of `root` when a target is the module or a function (a pass applied
    from a schedule); at most WATCH_LIMIT of them (`around` gives None past it)."""

    root: Operation
    spans: list[tuple[Block, Operation | None, Operation | None]] | None
    existing: set[Operation]

    @classmethod
    def around(cls, root: Operation, targets: Sequence[Operation]) -> Watch | None:
        spans: list[tuple[Block, Operation | None, Operation | None]] | None = []
        given = set(targets)
        for target in dict.fromkeys(targets):
            block = target.parent_block()
            if block is None or isinstance(target, _PROGRAM_OPS):
                spans = None
                break
            before, after = target.prev_op, target.next_op
            while before is not None and before in given:  # anchors the change keeps
                before = before.prev_op
            while after is not None and after in given:
                after = after.next_op
            spans.append((block, before, after))
        watch = cls(root, spans or None, set())
        watched = _all_ops(watch.ops() or [root], WATCH_LIMIT)
        if watched is None:
            return None
        watch.existing.update(watched)
        return watch

    def ops(self) -> list[Operation] | None:
        """The outermost ops watched now; None when an anchor has gone (the change reached
        past the ops it was given)."""
        if self.spans is None:
            return [self.root]
        found: dict[Operation, None] = {}
        for block, before, after in self.spans:
            if any(a is not None and a.parent_block() is not block for a in (before, after)):
                return None
            op = before.next_op if before is not None else block.first_op
            while op is not None and op is not after:
                found[op] = None
                op = op.next_op
        return list(found)

    def locate_made(self, by: LocationAttr) -> None:
        """After the change: the ops it made (new, or clones) at `derived_from(..., by)` (with
        an anchor gone, none: they are located after the schedule)."""
        tops = self.ops()
        if tops is None:
            return
        made = [op for op in _all_ops(tops) or () if op not in self.existing]
        derived: dict[int, tuple[LocationAttr, LocationAttr]] = {}  # by id: the ops made share locations

        def derive(base: LocationAttr) -> LocationAttr:
            found = derived.get(id(base))
            if found is None:
                found = derived[id(base)] = (base, derived_from(base, by))
            return found[1]

        _fill([op for op in made if not has_location(op)], {}, derive)
        for op in made:
            if not isinstance(op, _PROGRAM_OPS) and has_location(op):
                op.location = derive(op.location)


def stamp(op: Operation, loc: LocationAttr) -> None:
    """`op` and the ops inside it still at `loc(unknown)` take `loc`."""
    for inner in op.walk():
        if not has_location(inner):
            inner.location = loc


@dataclass(frozen=True)
class Located(RewritePattern):
    """`pattern`, the ops it makes while rewriting an op (inserted through the rewriter, or
    new in that op's block) located at that op, as MLIR's patterns build at `op->getLoc()`:

        PatternRewriteWalker(Located(LowerEinsum())).rewrite_module(module)
    """

    pattern: RewritePattern

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        loc = op.location
        if not has_location(op):
            self.pattern.match_and_rewrite(op, rewriter)
            return
        block = op.parent_block()
        # the ops new in the block: those now between op's neighbours (a builder inserting
        # before op, as einsums' nests are built); the whole block only when a neighbour went
        # (then compared with the ops it had), so a rewrite costs what it touches
        first, last = (op.prev_op, op.next_op) if block is not None else (None, None)
        ends = (block.first_op, block.last_op) if block is not None else (None, None)
        inserted: list[Operation] = []
        rewriter.operation_insertion_handler.append(inserted.append)
        try:
            self.pattern.match_and_rewrite(op, rewriter)
        except Exception as exc:
            tag(exc, op)
            raise
        finally:
            rewriter.operation_insertion_handler.remove(inserted.append)
        if block is not None and rewriter.has_done_action:  # a rewrite changes IR through the rewriter
            inserted += _new_between(block, op, first, last, ends)
        for new in inserted:
            stamp(new, loc)


def _new_between(
    block: Block, op: Operation, first: Operation | None, last: Operation | None,
    ends: tuple[Operation | None, Operation | None],
) -> list[Operation]:
    """The ops a rewrite of `op` put into `block` outside the rewriter: those between `op`'s
    neighbours before it (`first`, `last`; `ends`: the block's first and last ops then),
    `op` itself excepted. When a neighbour left the block or an end moved past the span (the
    rewrite reached further), the span cannot tell: a walk of the block finds the ops with
    an op still at `loc(unknown)` inside instead (those `stamp` changes; the ops before the
    rewrite are all located)."""
    anchors_kept = all(a is None or a.parent_block() is block for a in (first, last))
    ends_kept = (first is None or block.first_op is ends[0]) and (last is None or block.last_op is ends[1])
    if not (anchors_kept and ends_kept):
        return [new for new in block.ops if new is not op and not all(map(has_location, new.walk()))]
    new = first.next_op if first is not None else block.first_op
    found: list[Operation] = []
    while new is not None and new is not last:
        if new is not op:
            found.append(new)
        new = new.next_op
    return found


def keeping_locations(pipeline: PassPipeline) -> PassPipeline:
    """`pipeline` with `fill_locations` after each pass (before its own callback): every op a
    pass made carries the location of what it was made from."""
    own = pipeline.callback
    before: list[Context] = []

    def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
        if previous is not None:
            fill_locations(module, before.pop() if before else None)
        if following is not None:
            before.append(snapshot(module))
        if own is not None:
            own(previous, module, following)

    return PassPipeline(pipeline.passes, callback)
