"""einc.frontend.dims: the shape relations of a program (which input dimensions are tied
together, each output dimension as an input dimension or a constant) agree with the
frontend's own shape inference on random shapes, for matmuls, reductions, chains of
statements, scatters, `where` ranges, shifted indices and declared inputs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from einc.errors import SemanticError
from einc.frontend import parse_program
from einc.frontend.dims import ShapeRelations, shape_relations

ROOT = Path(__file__).resolve().parent.parent

# (program, input ranks, extra outputs)
PROGRAMS: list[tuple[str, dict[str, int], list[str] | None]] = [
    ("output0[N, M] +=! input0[N, K] * input1[K, M]", {"input0": 2, "input1": 2}, None),
    ("row_max[N] >=! input0[N, C]; row_sum[N] +=! (input0[N, C] - row_max[N]).call(`exp`); "
     "output0[N, C] = (input0[N, C] - row_max[N]).call(`exp`) / row_sum[N]", {"input0": 2}, ["row_max"]),
    ("hidden[N, M] +=! x[N, K] * w[K, M]; y[N, M] = (hidden[N, M] + b[M]).call(`max`, [0.0])",
     {"x": 2, "w": 2, "b": 1}, ["hidden"]),
    ("t[A, B] = x[B, A]; output0[A, B] = t[A, B] * y[A, B]", {"x": 2, "y": 2}, None),
    ("output0[N] = input0[N] + input1[N + 1]", {"input0": 1, "input1": 1}, None),
    ("output0[X, N] = input0[X] + input1[N] where X in 3", {"input0": 1, "input1": 1}, None),
    ("y[N, M] = x[N, M]; y[N, 0] =. 1.0", {"x": 2}, None),
    ("output0[N, M] +=! input0[N, M, K].when([K < 2], 0.0) where K in 2", {"input0": 3}, None),
]  # fmt: skip


def outputs_from(relations: ShapeRelations, shapes: list[list[int]]) -> list[list[int]]:
    """Each output's shape from the inputs', by the relations alone."""
    result = []
    for row in relations.output_groups:
        dims = []
        for g in row:
            group = relations.groups[g]
            dims.append(shapes[group.dims[0].index][group.dims[0].dim] if group.size is None else group.size)
        result.append(dims)
    return result


def spec(shapes: dict[str, list[int]]) -> dict[str, dict[str, object]]:
    return {name: {"dtype": "float32", "shape": shape} for name, shape in shapes.items()}


@pytest.mark.parametrize(("text", "ranks", "extra"), PROGRAMS, ids=[p[0][:30] for p in PROGRAMS])
def test_relations_agree_with_the_frontend_on_random_shapes(text: str, ranks: dict[str, int], extra: list[str] | None) -> None:
    rng = random.Random(5)
    example = {name: [4] * rank for name, rank in ranks.items()}
    if "N + 1" in text:
        example["input1"] = [5]
    relations = shape_relations(parse_program(text, "p.ein", spec(example), extra))
    names = list(ranks)
    accepted = 0
    for _ in range(40):
        sizes = [rng.randint(1, 9) for _ in relations.groups]  # one size per class
        shapes = [[sizes[g] if relations.groups[g].size is None else relations.groups[g].size
                   for g in relations.input_groups[i]] for i in range(len(names))]  # fmt: skip
        try:
            program = parse_program(text, "p.ein", spec(dict(zip(names, shapes))), extra)
        except SemanticError as err:
            assert "out of" in err.message or "range" in err.message, err.render()  # an index's range, not a shape
            continue
        accepted += 1
        assert [list(o.shape) for o in program.outputs] == outputs_from(relations, shapes)
        # and breaking one equality the relations name is refused
        for group in relations.groups:
            if group.size is None and len(group.dims) > 1:
                broken = [list(s) for s in shapes]
                last = group.dims[-1]
                broken[last.index][last.dim] += 1
                with pytest.raises(SemanticError, match="axis"):
                    parse_program(text, "p.ein", spec(dict(zip(names, broken))), extra)
    assert accepted >= 10


def test_matmul_relations_and_where_they_are_written() -> None:
    text = "output0[N, M] +=! input0[N, K] * input1[K, M]"
    relations = shape_relations(parse_program(text, "mm.ein", spec({"input0": [4, 6], "input1": [6, 5]})))
    assert [(g.axes, [(d.name, d.dim) for d in g.dims], g.size) for g in relations.groups] == [
        (("N",), [("input0", 0)], None), (("K",), [("input0", 1), ("input1", 0)], None), (("M",), [("input1", 1)], None),
    ]  # fmt: skip
    assert relations.input_groups == ((0, 1), (1, 2)) and relations.output_groups == ((0, 2),)
    assert [(b.dim.name, b.dim.dim, b.axis, b.span.col) for b in relations.bindings] == [
        ("input0", 0, "N", 26), ("input0", 1, "K", 29), ("input1", 0, "K", 41), ("input1", 1, "M", 44),
    ]  # fmt: skip


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.ein")), ids=lambda p: p.name)
def test_declared_programs_fix_every_input_dimension(path: Path) -> None:
    program = parse_program(path.read_text(), str(path))
    relations = shape_relations(program)
    assert relations.declared == {t.name for t in program.inputs}
    assert all(relations.groups[g].size is not None for row in relations.input_groups for g in row)
    shapes = [list(t.shape) for t in program.inputs]
    assert [list(o.shape) for o in program.outputs] == outputs_from(relations, shapes)
    if path.name == "mnist.ein":  # equal declared sizes are not tied: weight_1[512, 512]'s two dimensions
        weight_1 = relations.input_groups[[t.name for t in program.inputs].index("weight_1")]
        assert weight_1[0] != weight_1[1]
