"""einc's extension of the transform dialect: loop-schedule ops on `affine.for` nests.

    transform.named_sequence @__transform_main(%root: !transform.any_op) {
      %k = transform.einc.knob "tile_n" = 32 from [8, 16, 32, 64]
      %n = transform.einc.match stmt "output0" axis "N" in %root
      %no, %ni = transform.einc.tile %n by %k
      transform.einc.parallelize %no
      transform.yield
    }

Ops are named `transform.einc.*` and loaded into the context one by one (`load_ops`): the
upstream `transform` dialect keeps its name. Handles are `!transform.any_op`, knobs
`!transform.param<i64>`; einc's ops print without types (they are implied). Ops whose
syntax xDSL's declarative format can say exactly have an `assembly_format`; the others
parse by hand (a variadic result count, a literal that must be range-checked where it
stands, a clause that is optional in the text but always printed). Each op's
semantics is a utility of einc.transforms.loop_transforms; the interpreter implementation
is einc.schedule.interpreter.EincTransformFunctions.
"""

from __future__ import annotations

from typing import ClassVar, Self

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr, UnitAttr, i64
from xdsl.dialects.transform import AnyOpType, ParamType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    opt_operand_def,
    opt_prop_def,
    operand_def,
    prop_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

HANDLE = AnyOpType()
PARAM = ParamType(i64)


def _operand(parser: Parser, t: Attribute) -> SSAValue:
    return parser.resolve_operand(parser.parse_unresolved_operand(), t)


I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def _i64(parser: Parser, what: str) -> int:
    """An integer literal that fits a signed 64-bit integer (the type of sizes and knobs);
    a parse error at the literal otherwise (xDSL would refuse it unlocated, or wrap values
    in [2^63, 2^64) to negative ones)."""
    start = parser.pos
    value = parser.parse_integer()
    if not I64_MIN <= value <= I64_MAX:
        parser.raise_error(
            f"{what} {value} does not fit in a signed 64-bit integer "
            f"(at most {I64_MAX})", start, start + len(str(value)),
        )  # fmt: skip
    return value


def _size(parser: Parser, what: str) -> tuple[SSAValue | None, IntegerAttr | None]:
    """`%param` or an integer literal."""
    unresolved = parser.parse_optional_unresolved_operand()
    if isinstance(unresolved, UnresolvedOperand):
        return parser.resolve_operand(unresolved, PARAM), None
    return None, IntegerAttr(_i64(parser, what), i64)


def _print_size(printer: Printer, value: SSAValue | None, static: IntegerAttr | None) -> None:
    if value is not None:
        printer.print_ssa_value(value)
    else:
        assert static is not None
        printer.print_string(str(static.value.data))


class SizedLoopOp(IRDLOperation):
    """`transform.einc.<op> %loop by (%param | INT)`: tile, unroll, rfactor."""

    target = operand_def(AnyOpType)
    size = opt_operand_def(ParamType)
    static_size = opt_prop_def(IntegerAttr)
    NUM_RESULTS: ClassVar[int] = 1

    def __init__(self, target: SSAValue, size: SSAValue | int):
        dynamic = size if isinstance(size, SSAValue) else None
        static = IntegerAttr(size, i64) if isinstance(size, int) else None
        super().__init__(
            operands=[target, [dynamic] if dynamic is not None else []],
            properties={"static_size": static} if static is not None else {},
            result_types=[HANDLE] * self.NUM_RESULTS,
        )

    def verify_(self) -> None:
        if (self.size is None) == (self.static_size is None):
            raise VerifyException(f"{self.name} needs exactly one size: a param or an integer")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        target = _operand(parser, HANDLE)
        parser.parse_keyword("by")
        dynamic, static = _size(parser, f"{cls.name.removeprefix('transform.einc.')} size")
        op = cls(target, dynamic if dynamic is not None else static.value.data)  # type: ignore[union-attr]
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.target)
        printer.print_string(" by ")
        _print_size(printer, self.size, self.static_size)


@irdl_op_definition
class TileOp(SizedLoopOp):
    """Strip-mine a loop (`A` -> `A.o`, `A.i`); a size that does not divide the trip count
    gives the inner loop a `min` bound. Results: the outer and inner loops."""

    name = "transform.einc.tile"
    outer = result_def(AnyOpType)
    inner = result_def(AnyOpType)
    NUM_RESULTS: ClassVar[int] = 2


@irdl_op_definition
class UnrollOp(SizedLoopOp):
    """Unroll a constant-bound loop by a factor, with a tail loop for the rest. Result: the
    loops left (none when fully unrolled)."""

    name = "transform.einc.unroll"
    loops = result_def(AnyOpType)


@irdl_op_definition
class PeelOp(SizedLoopOp):
    """Split a constant-bound loop after its last whole chunk of `size` iterations: the loop
    keeps those, a copy after it runs the rest; by 1 on a tile loop it is MLIR's
    `transform.loop.peel` (the partial last tile goes, and inner `min` bounds the whole
    tiles decide become constants). Results: the loop and the remainder loop (an empty
    handle when the chunks divide the range)."""

    name = "transform.einc.peel"
    main = result_def(AnyOpType)
    rest = result_def(AnyOpType)
    NUM_RESULTS: ClassVar[int] = 2


@irdl_op_definition
class SplitPhasesOp(SizedLoopOp):
    """Split a constant-bound loop `x` into `size` phase loops over `t`, phase `r` running
    `x = lb + (r + size * t) * step` (einc.transforms.index_split.split_phases): a stride
    condition `(x + k) % size == 0` becomes constant per phase (folded), `(x + k) // size`
    an index affine in `t`. Refused for a loop carrying a dependence (the phases reorder its
    iterations). Result: the phase loops (same tags)."""

    name = "transform.einc.split_phases"
    phases = result_def(AnyOpType)


@irdl_op_definition
class CoalesceOp(SizedLoopOp):
    """`%p = transform.einc.coalesce %loop by 2`: loop coalescing (MLIR's
    `transform.loop.coalesce`; einc.transforms.coalesce): the perfect nest of `by` constant-bound
    loops from `%loop` down becomes one loop over the product of their trip counts (axis
    `HO.WO`), each old variable `p floordiv S mod T`; where the combined index is contiguous in
    a row-major buffer (`x[..., HO, WO]` with a last extent of WO's trip count) the linearised
    index is `p` (no division). Refused for an imperfect nest, a bound that is not a constant, a
    loop already marked (parallel, vectorize, bind). Result: the coalesced loops."""

    name = "transform.einc.coalesce"
    coalesced = result_def(AnyOpType)


@irdl_op_definition
class GroupLanesOp(SizedLoopOp):
    """`%o, %l = transform.einc.group_lanes %g by 2`: the loop `g` (a grouped convolution's
    group `F.q`) tiled by the size and its tile merged with `g`'s only child loop `f` (the
    channel in the group, `F.r`) into one loop `l` of size x |f| iterations, `g = size * g.o +
    l floordiv |f|`, `f = l mod |f|` (einc.transforms.group_lanes): the same iterations in the
    same order; a contiguous channel `8 * F.q + F.r` becomes unit-stride in `l`, the group's
    input `8 * F.q + C` constant over runs of |f| lanes (a vector over two groups, each
    group's input broadcast over its lanes). With `interleaved`, the group index is the
    fastest (`g = size * g.o + l mod size`, `f = l floordiv size`). Results: `g.o` (axis
    `F.q.o`) and `l` (axis `F.q.i*F.r`, or `F.r*F.q.i` interleaved)."""

    name = "transform.einc.group_lanes"
    outer = result_def(AnyOpType)
    lanes = result_def(AnyOpType)
    interleaved = opt_prop_def(UnitAttr)
    """`... by 2 interleaved`: the group index fastest, `g = size * g.o + l mod size`, `f = l
    floordiv size` (lane `size * f + g`: the pair form of the grouped convolution, whose
    input staged with the groups innermost is a run of `size` values repeated over the
    lanes)."""
    NUM_RESULTS: ClassVar[int] = 2

    def __init__(self, target: SSAValue, size: SSAValue | int, interleaved: bool = False):
        super().__init__(target, size)
        if interleaved:
            self.properties["interleaved"] = UnitAttr()

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        op = super().parse(parser)
        if parser.parse_optional_keyword("interleaved") is not None:
            op.properties["interleaved"] = UnitAttr()
        return op

    def print(self, printer: Printer) -> None:
        super().print(printer)
        if self.interleaved is not None:
            printer.print_string(" interleaved")


@irdl_op_definition
class DistributeOp(IRDLOperation):
    """`%a, %b = transform.einc.distribute %loop into 2`: loop distribution (fission,
    einc.transforms.distribute): a loop whose body holds several pieces (nested loops,
    stores; side-effect-free ops go with the pieces that use them) becomes one copy of the
    loop per piece, in order, same tags. Refused for a loop carrying a dependence, or with
    a body of another number of pieces than `into` says (a body of one piece stays whole
    with `into 1`). Result `k`: the copy holding piece `k` of each loop given (after
    `split_phases`, distributing the loops above the phases makes each phase a nest)."""

    name = "transform.einc.distribute"
    target = operand_def(AnyOpType)
    count = prop_def(IntegerAttr)
    copies = var_result_def(AnyOpType)

    def __init__(self, target: SSAValue, count: int):
        super().__init__(operands=[target], properties={"count": IntegerAttr(count, i64)},
                         result_types=[[HANDLE] * count])  # fmt: skip

    def verify_(self) -> None:
        if self.count.value.data < 1:
            raise VerifyException(f"{self.name} needs a piece count of at least 1, got {self.count.value.data}")
        if len(self.copies) != self.count.value.data:
            raise VerifyException(f"{self.name} into {self.count.value.data} has {len(self.copies)} results")

    @classmethod
    def parse(cls, parser: Parser) -> DistributeOp:
        target = _operand(parser, HANDLE)
        parser.parse_keyword("into")
        start = parser.pos
        count = _i64(parser, "distribute piece count")
        if not 1 <= count <= 64:
            parser.raise_error(f"distribute piece count must be in [1, 64], got {count}", start, parser.pos)
        return cls(target, count)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.target)
        printer.print_string(f" into {self.count.value.data}")


@irdl_op_definition
class RfactorOp(SizedLoopOp):
    """Split a reduction loop into `size` independent partial reductions (a partial buffer,
    then a combine nest). Results: the loop over the partials (parallel) and the combine
    nest."""

    name = "transform.einc.rfactor"
    partials = result_def(AnyOpType)
    combine = result_def(AnyOpType)
    NUM_RESULTS: ClassVar[int] = 2


class MarkLoopOp(IRDLOperation):
    """`transform.einc.<op> %loop`: mark loops (no results)."""

    target = operand_def(AnyOpType)
    assembly_format = "$target attr-dict"

    def __init__(self, target: SSAValue):
        super().__init__(operands=[target])


@irdl_op_definition
class ParallelizeOp(MarkLoopOp):
    """Run a loop's iterations in parallel (C: `#pragma omp parallel for`). Refused for a
    loop carrying a dependence (a reduction: rfactor first)."""

    name = "transform.einc.parallelize"


@irdl_op_definition
class VectorizeOp(MarkLoopOp):
    """Vectorize an innermost loop without carried dependences: `einc-vectorize-loops`
    lowers it to the GPU/SIMD dialect's vector ops of the target's width (a loop it cannot
    lower stays scalar; C prints `#pragma omp simd` for it)."""

    name = "transform.einc.vectorize"


@irdl_op_definition
class VectorizeReductionOp(MarkLoopOp):
    """Vectorize an innermost loop whose only carried dependences are reductions
    (`acc = acc + x`, `*`, max, min) into vector partial accumulators and a final lane
    reduction (einc.transforms.vectorize.mark_reduction_loop). Float sums are
    reassociated: results differ from the sequential order by rounding."""

    name = "transform.einc.vectorize_reduction"


@irdl_op_definition
class SplitConditionsOp(IRDLOperation):
    """`%pieces = transform.einc.split_conditions %loop`: index-set splitting
    (einc.transforms.index_split.split_conditions): cut a constant-bound loop where a
    comparison on loop variables in its body (a `.when`'s padding test) becomes or stops
    being decided, into consecutive copies whose decided comparisons are folded: the interior
    reads no condition, the boundary pieces keep theirs. The iterations keep their order:
    always legal; a loop along which no comparison changes stays whole. Result: the pieces
    (same tags), in order. With `inside`, the loop keeps all its iterations and its body
    becomes the pieces' bodies as branches of a test on its variable
    (einc.transforms.index_split.split_conditions_inside): a parallel loop's boundary pieces
    stay among its iterations, shared among the threads; result: the loop."""

    name = "transform.einc.split_conditions"
    target = operand_def(AnyOpType)
    pieces = result_def(AnyOpType)
    inside = opt_prop_def(UnitAttr)
    assembly_format = "$target (`inside` $inside^)? attr-dict"

    def __init__(self, target: SSAValue, inside: bool = False):
        super().__init__(operands=[target], result_types=[HANDLE], properties={"inside": UnitAttr()} if inside else {})


@irdl_op_definition
class TensorizeOp(IRDLOperation):
    """`%lanes = transform.einc.tensorize %loop "mma.m16n8k16"`: the 16 x 16 x K float16 or
    bfloat16 contraction band at `%loop` (rows, columns, reduction: three loops) computed on
    tensor cores by one warp (einc.transforms.tensorize): "mma.m16n8k16" on CUDA (sm_80+,
    32 lanes), "mfma.16x16x16" on HIP (CDNA, 64 lanes). Result: the loop over the lanes,
    bound to thread.x."""

    name = "transform.einc.tensorize"
    target = operand_def(AnyOpType)
    intrinsic = prop_def(StringAttr)
    lanes = result_def(AnyOpType)
    assembly_format = "$target $intrinsic attr-dict"

    def __init__(self, target: SSAValue, intrinsic: str):
        super().__init__(operands=[target], properties={"intrinsic": StringAttr(intrinsic)}, result_types=[HANDLE])


@irdl_op_definition
class BindOp(IRDLOperation):
    """`transform.einc.bind %loop to "thread.x" (max_threads 1024)?`: map a loop onto a
    GPU block/thread index (`einc.bind`); thread-bound trip counts in a nest multiply to at
    most `max_threads` (the target's limit when absent)."""

    name = "transform.einc.bind"
    target = operand_def(AnyOpType)
    axis = prop_def(StringAttr)
    max_threads = opt_prop_def(IntegerAttr)

    def __init__(self, target: SSAValue, axis: str, max_threads: int | None = None):
        props: dict[str, Attribute] = {"axis": StringAttr(axis)}
        if max_threads is not None:
            props["max_threads"] = IntegerAttr(max_threads, i64)
        super().__init__(operands=[target], properties=props)

    @classmethod
    def parse(cls, parser: Parser) -> BindOp:
        target = _operand(parser, HANDLE)
        parser.parse_keyword("to")
        axis = parser.parse_str_literal()
        limit = _i64(parser, "max_threads") if parser.parse_optional_keyword("max_threads") else None
        return cls(target, axis, limit)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.target)
        printer.print_string(f' to "{self.axis.data}"')
        if self.max_threads is not None:
            printer.print_string(f" max_threads {self.max_threads.value.data}")


@irdl_op_definition
class MatchOp(IRDLOperation):
    """`transform.einc.match (ops "NAME")? (stmt "OUT")? (axis "A")? (init)? in %root`: the
    ops nested in the payload (default `affine.for`) with those tags, in program order.
    Fill loops (`einc.init`) only match with `init`."""

    name = "transform.einc.match"
    root = operand_def(AnyOpType)
    op_name = opt_prop_def(StringAttr)
    stmt = opt_prop_def(StringAttr)
    axis = opt_prop_def(StringAttr)
    init = opt_prop_def(UnitAttr)
    result = result_def(AnyOpType)

    def __init__(
        self, root: SSAValue, op_name: str | None = None, stmt: str | None = None,
        axis: str | None = None, init: bool = False,
    ):
        props: dict[str, Attribute] = {}
        for key, value in (("op_name", op_name), ("stmt", stmt), ("axis", axis)):
            if value is not None:
                props[key] = StringAttr(value)
        if init:
            props["init"] = UnitAttr()
        super().__init__(operands=[root], properties=props, result_types=[HANDLE])

    @classmethod
    def parse(cls, parser: Parser) -> MatchOp:
        found: dict[str, str | None] = {"ops": None, "stmt": None, "axis": None}
        init = False
        while True:
            key = parser.parse_optional_keyword_in(("ops", "stmt", "axis", "init"))
            if key is None:
                break
            if key == "init":
                init = True
            else:
                found[key] = parser.parse_str_literal()
        parser.parse_keyword("in")
        root = _operand(parser, HANDLE)
        return cls(root, found["ops"], found["stmt"], found["axis"], init)

    def print(self, printer: Printer) -> None:
        for key, attr in (("ops", self.op_name), ("stmt", self.stmt), ("axis", self.axis)):
            if attr is not None:
                printer.print_string(f' {key} "{attr.data}"')
        if self.init is not None:
            printer.print_string(" init")
        printer.print_string(" in ")
        printer.print_ssa_value(self.root)


@irdl_op_definition
class ReorderOp(IRDLOperation):
    """`transform.einc.reorder %a, %b, ...`: permute the loops of a perfect nest into the
    listed order (outermost first); interchange is the two-loop case. Results: the new loops,
    in the listed order."""

    name = "transform.einc.reorder"
    targets = var_operand_def(AnyOpType)
    loops = var_result_def(AnyOpType)

    def __init__(self, targets: list[SSAValue]):
        super().__init__(operands=[targets], result_types=[[HANDLE] * len(targets)])

    @classmethod
    def parse(cls, parser: Parser) -> ReorderOp:
        targets = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, lambda: _operand(parser, HANDLE)
        )
        return cls(targets)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.targets, printer.print_ssa_value)


@irdl_op_definition
class RotateOp(IRDLOperation):
    """`%a2, %b2, %c2 = transform.einc.rotate %a, %b, %c by (%param | INT)`: the loops of a
    perfect band (listed outermost first) run in the order `[loops[k:], loops[:k]]`, a
    reduction's loops included where the reduction reassociates (one accumulation by add,
    mul, max or min; float sums in another order: einc.transforms.reduction_order); by 0
    nothing changes. The CPU tuning space's reduction-order knob (`stmt.reduce_order`: input
    channels or window positions innermost). Results: the loops, in the listed order (each the
    loop its operand named, wherever it now sits)."""

    name = "transform.einc.rotate"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    targets = var_operand_def(AnyOpType)
    size = opt_operand_def(ParamType)
    static_size = opt_prop_def(IntegerAttr)
    loops = var_result_def(AnyOpType)

    def __init__(self, targets: list[SSAValue], size: SSAValue | int):
        dynamic = size if isinstance(size, SSAValue) else None
        static = IntegerAttr(size, i64) if isinstance(size, int) else None
        super().__init__(
            operands=[targets, [dynamic] if dynamic is not None else []],
            properties={"static_size": static} if static is not None else {},
            result_types=[[HANDLE] * len(targets)],
        )

    def verify_(self) -> None:
        if (self.size is None) == (self.static_size is None):
            raise VerifyException(f"{self.name} needs exactly one size: a param or an integer")

    @classmethod
    def parse(cls, parser: Parser) -> RotateOp:
        targets = parser.parse_comma_separated_list(parser.Delimiter.NONE, lambda: _operand(parser, HANDLE))
        parser.parse_keyword("by")
        dynamic, static = _size(parser, "rotate amount")
        if dynamic is not None:
            return cls(targets, dynamic)
        assert static is not None
        return cls(targets, static.value.data)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.targets, printer.print_ssa_value)
        printer.print_string(" by ")
        _print_size(printer, self.size, self.static_size)


@irdl_op_definition
class FuseOp(IRDLOperation):
    """`transform.einc.fuse %first into %second`: fuse two sibling loops with the same bounds
    (a fill into its reduction, two nests over the same rows; compute_at and
    reverse_compute_at move a nest into a loop of any depth). Result: the fused loop."""

    name = "transform.einc.fuse"
    first = operand_def(AnyOpType)
    second = operand_def(AnyOpType)
    fused = result_def(AnyOpType)
    assembly_format = "$first `into` $second attr-dict"

    def __init__(self, first: SSAValue, second: SSAValue):
        super().__init__(operands=[first, second], result_types=[HANDLE])


@irdl_op_definition
class ReuseOp(IRDLOperation):
    """`transform.einc.reuse %first in %second`: a value two sibling innermost loops of the
    same bounds both compute per iteration (the same ops on the same loads, inputs not
    written in between) is kept in a local array by `first` and loaded by `second` instead
    of computed again (einc.transforms.loop_cse). No results: the loops stay."""

    name = "transform.einc.reuse"
    first = operand_def(AnyOpType)
    second = operand_def(AnyOpType)
    assembly_format = "$first `in` $second attr-dict"

    def __init__(self, first: SSAValue, second: SSAValue):
        super().__init__(operands=[first, second])


class AtLoopOp(IRDLOperation):
    """`transform.einc.<op> %stmt at %loop`: move a statement's nest into a loop of another
    (no results: the moved loops keep their tags, match them again)."""

    target = operand_def(AnyOpType)
    loop = operand_def(AnyOpType)
    assembly_format = "$target `at` $loop attr-dict"

    def __init__(self, target: SSAValue, loop: SSAValue):
        super().__init__(operands=[target, loop])


@irdl_op_definition
class ComputeAtOp(AtLoopOp):
    """`transform.einc.compute_at %producer at %loop`: at the start of each iteration of a
    consumer's loop, compute the box of the producer's tensor that the iteration reads (into
    a local buffer; overlapping boxes are recomputed); the original producer goes when
    nothing else reads its tensor. The handle %producer may hold a statement's loops (the
    outermost is its nest). Mechanism: einc.transforms.compute_at."""

    name = "transform.einc.compute_at"


@irdl_op_definition
class ReverseComputeAtOp(AtLoopOp):
    """`transform.einc.reverse_compute_at %consumer at %loop`: at the end of each iteration
    of a producer's loop, compute the elements of an elementwise consumer whose inputs that
    iteration completed (an epilogue fused into a reduction's row loop)."""

    name = "transform.einc.reverse_compute_at"


class CacheOp(IRDLOperation):
    """`transform.einc.cache_<read|write> "TENSOR" at %loop (in "local"|"shared")? (split D
    by F)? (layout [P0, P1, ...])? (pad N)? (halo)?`: stage the tile of a tensor the loop body touches in a buffer allocated
    in the body (`memref.alloca`): copied in at the start (and out at the end, for writes);
    the body's accesses are redirected to it. `layout` orders the buffer's dimensions, in
    local or shared memory: its dimension d is the tensor's dimension P_d (a packed weight
    `[C, KH, KW, F]` of a filter `[F, C, KH, KW]` is `layout [1, 2, 3, 0]`: a shared tile
    read along F with vector loads; with `split D by F` the buffer has one more dimension:
    the tensor's dimension D staged as `x floordiv F`, `x mod F` (a grouped channel as group x
    channel-in-group, einc.transforms.staging.split_box), which the layout orders like the
    others (`split 1 by 8 layout [0, 2, 3, 4, 1]`: two groups' values of a pixel side by
    side); without it the
    buffer keeps the tensor's order. `pad` (shared buffers only) lengthens each row of the
    buffer by N unused elements against bank conflicts (einc-pad-shared; without it that
    pass chooses from the target's bank count). `halo` (cache_read into local memory only):
    the buffer holds the reads' box with its part outside the tensor, filled with the value
    their bounds guards (`.when` of the indices inside the tensor) give there, and those
    reads lose their guards: a padded window's taps become runs of whole vectors
    (einc.transforms.halo). Result: the staging buffer's allocation."""

    target = operand_def(AnyOpType)
    tensor = prop_def(StringAttr)
    memory = prop_def(StringAttr)
    layout = opt_prop_def(ArrayAttr[IntegerAttr])
    pad = opt_prop_def(IntegerAttr)
    halo = opt_prop_def(UnitAttr)
    split = opt_prop_def(ArrayAttr[IntegerAttr])
    buffer = result_def(AnyOpType)

    def __init__(
        self, target: SSAValue, tensor: str, memory: str = "local", layout: tuple[int, ...] | None = None,
        pad: int | None = None, halo: bool = False, split: tuple[int, int] | None = None,
    ):
        properties: dict[str, Attribute] = {"tensor": StringAttr(tensor), "memory": StringAttr(memory)}
        if split is not None:
            properties["split"] = ArrayAttr([IntegerAttr(v, i64) for v in split])
        if halo:
            properties["halo"] = UnitAttr()
        if layout is not None:
            properties["layout"] = ArrayAttr([IntegerAttr(v, i64) for v in layout])
        if pad is not None:
            properties["pad"] = IntegerAttr(pad, i64)
        super().__init__(operands=[target], properties=properties, result_types=[HANDLE])

    @property
    def pad_elements(self) -> int | None:
        """The elements each row of a shared buffer is padded by (`pad`), or None: chosen
        by `einc-pad-shared` from the target's bank count."""
        return None if self.pad is None else self.pad.value.data

    @property
    def split_at(self) -> tuple[int, int] | None:
        """(D, F) of `split D by F`, or None."""
        if self.split is None:
            return None
        d, f = (a.value.data for a in self.split.data)
        return d, f

    @property
    def layout_order(self) -> tuple[int, ...] | None:
        """The buffer's dimension order (`layout`), or None: the tensor's."""
        return None if self.layout is None else tuple(a.value.data for a in self.layout.data)

    def verify_(self) -> None:
        if self.memory.data not in ("local", "shared"):
            raise VerifyException(f"{self.name}: memory must be \"local\" or \"shared\"")
        order = self.layout_order
        if order is not None:
            if sorted(order) != list(range(len(order))):
                raise VerifyException(f"{self.name}: layout {list(order)} is not a permutation of 0..{len(order) - 1}")
        if self.split is not None and (len(self.split.data) != 2 or self.memory.data != "local"):
            raise VerifyException(f"{self.name}: split is one dimension and a factor, for local memory only")
        if self.halo is not None and (self.memory.data != "local" or self.name != "transform.einc.cache_read"):
            raise VerifyException(f"{self.name}: halo is for cache_read into local memory only")
        if self.pad is not None:
            if self.memory.data != "shared":
                raise VerifyException(f"{self.name}: pad is for shared buffers only")
            if not 0 <= self.pad.value.data <= 64:
                raise VerifyException(f"{self.name}: pad {self.pad.value.data} is not in 0..64")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        tensor = parser.parse_str_literal()
        parser.parse_keyword("at")
        target = _operand(parser, HANDLE)
        memory = parser.parse_str_literal() if parser.parse_optional_keyword("in") else "local"
        split = None
        if parser.parse_optional_keyword("split"):
            d = _i64(parser, "split dimension")
            parser.parse_keyword("by")
            split = (d, _i64(parser, "split factor"))
        layout = None
        if parser.parse_optional_keyword("layout"):
            layout = tuple(parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: _i64(parser, "layout")))
        pad = None
        if parser.parse_optional_keyword("pad"):
            start = parser.pos
            pad = _i64(parser, "pad")
            if memory != "shared" or not 0 <= pad <= 64:
                parser.raise_error("pad (0 to 64 elements) is for shared buffers only" if memory != "shared"
                                   else f"pad {pad} is not in 0..64", start, start + len(str(pad)))  # fmt: skip
        halo = False
        start = parser.pos
        if parser.parse_optional_keyword("halo"):
            if memory != "local" or cls.name != "transform.einc.cache_read":
                parser.raise_error("halo is for cache_read into local memory only", start, start + 4)
            halo = True
        return cls(target, tensor, memory, layout, pad, halo, split)

    def print(self, printer: Printer) -> None:
        printer.print_string(f' "{self.tensor.data}" at ')
        printer.print_ssa_value(self.target)
        printer.print_string(f' in "{self.memory.data}"')
        if (split := self.split_at) is not None:
            printer.print_string(f" split {split[0]} by {split[1]}")
        order = self.layout_order
        if order is not None:
            printer.print_string(f" layout [{', '.join(map(str, order))}]")
        if self.pad is not None:
            printer.print_string(f" pad {self.pad.value.data}")
        if self.halo is not None:
            printer.print_string(" halo")


@irdl_op_definition
class CacheReadOp(CacheOp):
    """Stage a tensor the loop body reads: copied into the buffer at the start of each
    iteration (see CacheOp)."""

    name = "transform.einc.cache_read"


@irdl_op_definition
class CacheWriteOp(CacheOp):
    """Stage a tensor the loop body writes (an output tile, an accumulator): copied in at
    the start of each iteration and back at its end (see CacheOp)."""

    name = "transform.einc.cache_write"


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """`%p = transform.einc.prefetch "TENSOR" at %loop by D [spread %inner]`: at the top of the
    loop's body, prefetch (a cache hint, `egpu.prefetch`) the part of the tensor's tile that
    iteration `i + D * step` reads and iteration `i + (D - 1) * step` does not
    (einc.transforms.prefetch): C prints `__builtin_prefetch`, the other targets nothing;
    the values computed are the same. `spread %inner` (a loop inside %loop): those lines
    fetched a slice per iteration of %inner instead of all at the top (a staged pair of
    groups' next 16 planes, a row of each per output row). `spread %inner evenly`: the tile,
    one run of the tensor, spread over every iteration of the loops from %loop's body down to
    %inner (a batched matmul's next head, a few elements further each step of its k loop).
    Result: the prefetch ops."""

    name = "transform.einc.prefetch"
    target = operand_def(AnyOpType)
    spread = opt_operand_def(AnyOpType)
    tensor = prop_def(StringAttr)
    distance = prop_def(IntegerAttr)
    evenly = opt_prop_def(UnitAttr)
    prefetches = result_def(AnyOpType)

    def __init__(self, target: SSAValue, tensor: str, distance: int, spread: SSAValue | None = None,
                 evenly: bool = False):  # fmt: skip
        properties: dict[str, Attribute] = {"tensor": StringAttr(tensor), "distance": IntegerAttr(distance, i64)}
        if evenly:
            properties["evenly"] = UnitAttr()
        super().__init__(operands=[target, [spread] if spread is not None else []], properties=properties,
                         result_types=[HANDLE])  # fmt: skip

    def verify_(self) -> None:
        if not 1 <= self.distance.value.data <= 64:
            raise VerifyException(f"{self.name}: distance {self.distance.value.data} is not in 1..64")
        if self.evenly is not None and self.spread is None:
            raise VerifyException(f"{self.name}: evenly without a loop to spread over")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        tensor = parser.parse_str_literal()
        parser.parse_keyword("at")
        target = _operand(parser, HANDLE)
        parser.parse_keyword("by")
        start = parser.pos
        distance = _i64(parser, "distance")
        if not 1 <= distance <= 64:
            parser.raise_error(f"prefetch distance {distance} is not in 1..64", start, start + len(str(distance)))
        spread = _operand(parser, HANDLE) if parser.parse_optional_keyword("spread") else None
        evenly = spread is not None and parser.parse_optional_keyword("evenly") is not None
        return cls(target, tensor, distance, spread, evenly)

    def print(self, printer: Printer) -> None:
        printer.print_string(f' "{self.tensor.data}" at ')
        printer.print_ssa_value(self.target)
        printer.print_string(f" by {self.distance.value.data}")
        if self.spread is not None:
            printer.print_string(" spread ")
            printer.print_ssa_value(self.spread)
            if self.evenly is not None:
                printer.print_string(" evenly")


@irdl_op_definition
class DoubleBufferOp(IRDLOperation):
    """`transform.einc.double_buffer %staged`: keep two copies of a tile a `cache_read ... in
    "shared"` staged at a reduction loop, and load the tile of iteration k + 1 while
    iteration k computes on the other, with one barrier per iteration
    (einc.transforms.double_buffer). Refused where the buffer is not a shared cache_read
    at a reduction loop with constant bounds. No results."""

    name = "transform.einc.double_buffer"
    target = operand_def(AnyOpType)
    assembly_format = "$target attr-dict"

    def __init__(self, target: SSAValue):
        super().__init__(operands=[target])


@irdl_op_definition
class StreamStoresOp(IRDLOperation):
    """`transform.einc.stream_stores %tile`: store the copy-out of a `cache_write` tile with
    non-temporal stores (C: `vmovntps` where the address is aligned to the vector, a plain
    store where not; `sfence` at the end of the function; other targets: plain stores), for
    an output written once (einc.transforms.stream_stores). Refused where the handle is not a
    local cache_write tile into a kernel argument, or the kernel reads that output back; and
    when the kernel is built, where a marked store did not become a vector store (located
    here). No results."""

    name = "transform.einc.stream_stores"
    target = operand_def(AnyOpType)
    assembly_format = "$target attr-dict"

    def __init__(self, target: SSAValue):
        super().__init__(operands=[target])


@irdl_op_definition
class UnswitchOp(IRDLOperation):
    """`%versions = transform.einc.unswitch %loop {max_versions = 8}`: loop unswitching by
    hand (the policy of the `einc-unswitch` pass, einc.passes.unswitch.unswitch_guards):
    the guards (`scf.if`s, `.when` reads included) whose nearest enclosing loop is `%loop`
    and whose condition, or a conjunct of it, it does not change are tested once before it, the strongest first, the loop
    versioned into at most `max_versions` copies (default 8, at least 2). Refused where no
    such guard can be hoisted. Result: the versions of each loop, in program order (the
    first, every hoisted guard true, is the loop itself)."""

    name = "transform.einc.unswitch"
    target = operand_def(AnyOpType)
    max_versions = opt_prop_def(IntegerAttr)
    versions = result_def(AnyOpType)

    def __init__(self, target: SSAValue, max_versions: int | None = None):
        props: dict[str, Attribute] = {}
        if max_versions is not None:
            props["max_versions"] = IntegerAttr(max_versions, i64)
        super().__init__(operands=[target], properties=props, result_types=[HANDLE])

    def verify_(self) -> None:
        if self.max_versions is not None and not 2 <= self.max_versions.value.data <= MAX_UNSWITCH_VERSIONS:
            raise VerifyException(f"{self.name}: max_versions {self.max_versions.value.data} is not in 2..{MAX_UNSWITCH_VERSIONS}")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        target = _operand(parser, HANDLE)
        limit = None
        if parser.parse_optional_punctuation("{") is not None:
            parser.parse_keyword("max_versions")
            parser.parse_punctuation("=")
            start = parser.pos
            limit = _i64(parser, "max_versions")
            if not 2 <= limit <= MAX_UNSWITCH_VERSIONS:
                parser.raise_error(f"unswitch max_versions {limit} is not in 2..{MAX_UNSWITCH_VERSIONS}",
                                   start, start + len(str(limit)))  # fmt: skip
            parser.parse_punctuation("}")
        return cls(target, limit)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.target)
        if self.max_versions is not None:
            printer.print_string(f" {{max_versions = {self.max_versions.value.data}}}")


MAX_UNSWITCH_VERSIONS = 64
"""The most versions `transform.einc.unswitch` may make of one loop (each a copy of it)."""


@irdl_op_definition
class PackRowsOp(IRDLOperation):
    """`transform.einc.pack_rows %buffer at %loop`: move the copy-in of a `cache_read` buffer
    into a later loop of its block that reads a sliding window of its rows (a convolution's
    output rows), each iteration copying the rows it reads first, a prologue before the loop
    the first window's others (einc.transforms.pack_rows). Refused where the buffer's
    reads do not slide along one dimension with the loop. No results."""

    name = "transform.einc.pack_rows"
    target = operand_def(AnyOpType)
    loop = operand_def(AnyOpType)
    assembly_format = "$target `at` $loop attr-dict"

    def __init__(self, target: SSAValue, loop: SSAValue):
        super().__init__(operands=[target, loop])


@irdl_op_definition
class HoistFillOp(IRDLOperation):
    """`transform.einc.hoist_fill %buffer`: move a `cache_read` buffer allocated in a loop's
    body, and its constant fill nests (a halo's frame the copy-in never overwrites), before
    that loop: the frame written once, not every iteration (einc.transforms.hoist_fill).
    Refused where the loop runs in parallel or another store may write the filled elements.
    No results."""

    name = "transform.einc.hoist_fill"
    target = operand_def(AnyOpType)
    assembly_format = "$target attr-dict"

    def __init__(self, target: SSAValue):
        super().__init__(operands=[target])


@irdl_op_definition
class KnobOp(IRDLOperation):
    """`%p = transform.einc.knob "NAME" = 32 from [8, 16, 32]`: a tunable integer with its
    allowed values and the selected one (as MLIR's `transform.tune.knob`). A search sets
    `selected` in memory (einc.schedule.script.Schedule.with_values), never in the text."""

    name = "transform.einc.knob"
    knob_name = prop_def(StringAttr)
    options = prop_def(ArrayAttr[IntegerAttr])
    selected = prop_def(IntegerAttr)
    result = result_def(ParamType)

    def __init__(self, knob_name: str, options: list[int], selected: int):
        super().__init__(
            properties={
                "knob_name": StringAttr(knob_name),
                "options": ArrayAttr([IntegerAttr(v, i64) for v in options]),
                "selected": IntegerAttr(selected, i64),
            },
            result_types=[PARAM],
        )

    @property
    def values(self) -> list[int]:
        return [a.value.data for a in self.options.data]

    def verify_(self) -> None:
        if not self.values:
            raise VerifyException(f"knob '{self.knob_name.data}' has no values to choose from")
        if self.selected.value.data not in self.values:
            raise VerifyException(
                f"knob '{self.knob_name.data}': {self.selected.value.data} is not one of "
                f"{self.values}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> KnobOp:
        name = parser.parse_str_literal()
        parser.parse_punctuation("=")
        start = parser.pos
        selected = _i64(parser, f"knob '{name}': value")
        end = start + len(str(selected))
        parser.parse_keyword("from")
        list_start = parser.pos
        options = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: _i64(parser, f"knob '{name}': option")
        )
        if not options:
            parser.raise_error(f"knob '{name}' has no values to choose from", list_start, list_start + 1)
        if selected not in options:
            parser.raise_error(f"knob '{name}': {selected} is not one of {options}", start, end)
        return cls(name, options, selected)

    def print(self, printer: Printer) -> None:
        printer.print_string(
            f' "{self.knob_name.data}" = {self.selected.value.data} from '
            f"[{', '.join(str(v) for v in self.values)}]"
        )


EINC_TRANSFORM_OPS: tuple[type[Operation], ...] = (
    MatchOp, KnobOp, TileOp, PeelOp, ReorderOp, UnrollOp, ParallelizeOp, VectorizeOp, BindOp,
    VectorizeReductionOp, ReuseOp, FuseOp, CacheReadOp, CacheWriteOp, RfactorOp, ComputeAtOp, ReverseComputeAtOp,
    SplitConditionsOp, SplitPhasesOp, TensorizeOp, DoubleBufferOp, DistributeOp, CoalesceOp, GroupLanesOp,
    RotateOp, PrefetchOp, StreamStoresOp, UnswitchOp, PackRowsOp, HoistFillOp,
)


def load_ops(ctx: Context) -> None:
    """Make `transform.einc.*` parseable in `ctx` (ops named inside the upstream `transform`
    dialect are loaded one by one; loading twice is harmless)."""
    for op in EINC_TRANSFORM_OPS:
        if ctx.get_optional_op(op.name) is None:
            ctx.load_op(op)


__all__ = [op.__name__ for op in EINC_TRANSFORM_OPS] + ["EINC_TRANSFORM_OPS", "MAX_UNSWITCH_VERSIONS", "load_ops"]
