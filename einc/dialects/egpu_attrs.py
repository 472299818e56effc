"""The `egpu` dialect's attributes: the launch dimension (`x y z`), the reduction kind, and a
kernel's split over Poplar tiles (`#egpu.tile_split<...>`). The dialect is `einc.dialects.egpu`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import auto

from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Data, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum


class Dim(StrEnum):
    X = auto()
    Y = auto()
    Z = auto()

    @property
    def index(self) -> int:
        return "xyz".index(str(self))


class ReduceKind(StrEnum):
    ADD = auto()
    MUL = auto()
    MAX = auto()
    MIN = auto()


@irdl_attr_definition
class DimAttr(EnumAttribute[Dim], SpacedOpaqueSyntaxAttribute):
    name = "egpu.dim"


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    name = "egpu.reduce_kind"


# ---- a kernel's split over Poplar tiles ----------------------------------------------------


Box = tuple[int, tuple[int, ...], tuple[tuple[int, ...], ...]]
"""A read-only argument connected as a box: (argument, extents per dimension, the box's low
corner per dimension: one per vertex, or () where the extent is the whole dimension)."""


@dataclass(frozen=True)
class TileSplit:
    """How a kernel runs on Poplar tiles (`split-poplar-vertices` decides, the Poplar printer
    prints it): `vertices` vertices of at most `bytes` bytes of tile memory each. With one
    vertex the kernel runs whole on tile 0 (`points`, `chunk` 0, no slices). Else, in
    ranges (`chunk` > 0), vertex t runs the points [t * chunk, min((t + 1) * chunk, points))
    of the kernel's point loop (its one top-level `scf.for`) on tile t; `written` holds (argument,
    s, c) for each written argument accessed only at flat element s * point + c; `read`
    holds (argument, first elements, end elements) for each other argument connected as
    one slice per vertex: a read-only one's elements the vertex reads, or a written one
    whose points each access a range of elements (a register tile of outputs per point:
    the slice is the hull of the vertex's points' ranges, disjoint from every other
    vertex's, and mapped to its tile). In boxes (`shape` non-empty, `chunk` 0), the points are indexed
    row-major by `shape` (the written buffers' shape; each written at 1 * point + 0) and
    vertex t runs the t-th box of `tile` points (boxes in row-major order, clipped to
    `shape`), writing that box of each written buffer; `boxes` holds each read-only
    argument connected as a box (see Box), and each written one whose points are register
    tiles (`egpu.point_shape`: `shape` is the points' shape; the boxes are disjoint, each
    clipped to the tensor, [low, min(low + extent, size)), where the grid does not divide it)."""

    vertices: int
    bytes: int
    points: int = 0
    chunk: int = 0
    written: tuple[tuple[int, int, int], ...] = ()
    read: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...] = ()
    shape: tuple[int, ...] = ()
    tile: tuple[int, ...] = ()
    boxes: tuple[Box, ...] = ()

    @property
    def split(self) -> bool:
        return self.vertices > 1

    @property
    def in_boxes(self) -> bool:
        return bool(self.shape)

    @property
    def grid(self) -> tuple[int, ...]:
        """Boxes per dimension of `shape`."""
        return tuple(-(-p // t) for p, t in zip(self.shape, self.tile))

    @property
    def written_at(self) -> dict[int, tuple[int, int]]:
        """Written argument -> (s, c)."""
        return {k: (s, c) for k, s, c in self.written}

    @property
    def read_slices(self) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
        """Read argument -> (first elements, end elements), one per vertex."""
        return {k: (first, end) for k, first, end in self.read}

    @property
    def bases(self) -> list[int]:
        """The arguments indexed from their slice's or box's first element (`einc_base<k>`);
        a box split indexes its written buffers by the point's place in its box."""
        if self.in_boxes:
            return sorted(k for k, _, _ in self.boxes)
        return sorted([*(k for k, _, _ in self.written), *(k for k, _, _ in self.read)])


@irdl_attr_definition
class TileSplitAttr(Data[TileSplit]):
    """`#egpu.tile_split<vertices = 1, bytes = 80>` or `#egpu.tile_split<vertices = 7,
    bytes = 1296, points = 300, chunk = 43, written = [1 at 1 * point + 0], read = [2 from
    [0, 0, 0, 1, 1, 2, 2] to [1, 1, 2, 2, 3, 3, 3]]>`: an `egpu.func`'s `egpu.tile_split`
    attribute (see TileSplit)."""

    name = "egpu.tile_split"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> TileSplit:
        def field(keyword: str) -> int:
            parser.parse_keyword(keyword)
            parser.parse_punctuation("=")
            return parser.parse_integer(allow_boolean=False)

        def integers() -> tuple[int, ...]:
            return tuple(
                parser.parse_comma_separated_list(
                    parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
                )
            )

        def written() -> tuple[int, int, int]:
            k = parser.parse_integer(allow_boolean=False)
            parser.parse_keyword("at")
            s = parser.parse_integer(allow_boolean=False)
            parser.parse_punctuation("*")
            parser.parse_keyword("point")
            parser.parse_punctuation("+")
            return k, s, parser.parse_integer(allow_boolean=False)

        def read() -> tuple[int, tuple[int, ...], tuple[int, ...]]:
            k = parser.parse_integer(allow_boolean=False)
            parser.parse_keyword("from")
            first = integers()
            parser.parse_keyword("to")
            return k, first, integers()

        def box() -> Box:
            k = parser.parse_integer(allow_boolean=False)
            parser.parse_keyword("box")
            extent = integers()
            parser.parse_keyword("at")
            return k, extent, tuple(parser.parse_comma_separated_list(parser.Delimiter.SQUARE, integers))

        def parse_written() -> list[tuple[int, int, int]]:
            parser.parse_keyword("written")
            parser.parse_punctuation("=")
            return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, written)

        with parser.in_angle_brackets():
            vertices = field("vertices")
            parser.parse_punctuation(",")
            size = field("bytes")
            if parser.parse_optional_punctuation(",") is None:
                return TileSplit(vertices, size)
            points = field("points")
            parser.parse_punctuation(",")
            if parser.parse_optional_keyword("box") is not None:
                parser.parse_punctuation("=")
                tile = integers()
                parser.parse_keyword("in")
                shape = integers()
                parser.parse_punctuation(",")
                writes = parse_written()
                parser.parse_punctuation(",")
                parser.parse_keyword("read")
                parser.parse_punctuation("=")
                boxes = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, box)
                return TileSplit(vertices, size, points, 0, tuple(writes), (), shape, tile, tuple(boxes))
            chunk = field("chunk")
            parser.parse_punctuation(",")
            writes = parse_written()
            parser.parse_punctuation(",")
            parser.parse_keyword("read")
            parser.parse_punctuation("=")
            reads = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, read)
        return TileSplit(vertices, size, points, chunk, tuple(writes), tuple(reads))

    def print_parameter(self, printer: Printer) -> None:
        t = self.data
        listed = lambda xs: f"[{', '.join(map(str, xs))}]"
        with printer.in_angle_brackets():
            printer.print_string(f"vertices = {t.vertices}, bytes = {t.bytes}")
            if not t.split:
                return
            writes = ", ".join(f"{k} at {s} * point + {c}" for k, s, c in t.written)
            if t.in_boxes:
                boxes = ", ".join(
                    f"{k} box {listed(extent)} at [{', '.join(listed(low) for low in lows)}]"
                    for k, extent, lows in t.boxes
                )
                printer.print_string(
                    f", points = {t.points}, box = {listed(t.tile)} in {listed(t.shape)}, "
                    f"written = [{writes}], read = [{boxes}]"
                )
                return
            reads = ", ".join(f"{k} from {listed(first)} to {listed(end)}" for k, first, end in t.read)
            printer.print_string(
                f", points = {t.points}, chunk = {t.chunk}, written = [{writes}], read = [{reads}]"
            )

    def verify(self) -> None:
        t = self.data
        if t.vertices < 1 or t.bytes < 0:
            raise VerifyException(f"egpu.tile_split: bad vertex count or size in {t}")
        if not t.split:
            if t.points or t.chunk or t.written or t.read:
                raise VerifyException("egpu.tile_split: one vertex has no points or slices")
            return
        if t.in_boxes:
            if len(t.tile) != len(t.shape) or math.prod(t.shape) != t.points or not (t.written or t.boxes):
                raise VerifyException(f"egpu.tile_split: boxes of {t.tile} points in {t.shape} are not {t.points} points")
            if math.prod(t.grid) != t.vertices or t.chunk or t.read or min(t.tile) < 1:
                raise VerifyException(f"egpu.tile_split: boxes of {t.tile} in {t.shape} are not {t.vertices} vertices")
            for _, extent, lows in t.boxes:
                if len(extent) != len(lows) or any(len(low) not in (0, t.vertices) for low in lows):
                    raise VerifyException("egpu.tile_split: a box's low corner per dimension and vertex")
            return
        if t.chunk < 1 or -(-t.points // t.chunk) != t.vertices or not (t.written or t.read):
            raise VerifyException(
                f"egpu.tile_split: {t.points} points in chunks of {t.chunk} are not "
                f"{t.vertices} vertices (or nothing is sliced)"
            )
        if any(len(first) != t.vertices or len(end) != t.vertices for _, first, end in t.read):
            raise VerifyException("egpu.tile_split: a read slice per vertex")
