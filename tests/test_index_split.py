"""Index simplification (`einc-split-index-axes`, einc/transforms/axis_split.py): a loop whose
variable is divided by a constant dividing its extent is split so that `F // d` and `F % d`
become loop variables; on every target the numbers stay NumPy's.

- `simplify_divmod` keeps every value: checked exhaustively on random expressions over small
  ranges (negative ones included, where it must leave the division as written).
- One program holds the cases (a padded grouped convolution, a strided grouped convolution,
  a depthwise convolution with a channel multiplier, a plain depthwise one, an extent the
  divisor does not divide, dividends that may be negative, a two-level split, the loop
  variable used as a value, a division that needs no split, a scatter into `data[F % 4]`):
  its loops are split where they should be and only there, and it
  runs on C, OpenCL, SYCL, HLSL and Poplar against a float64 NumPy reference on fresh random
  inputs; CUDA and HIP compile it.
- The default C of a grouped convolution has no `/` or `%` in its innermost loops.
- Random indices of divisions and remainders (the random program generator's rarely have an
  extent the divisor divides): the interpreter and C equal NumPy.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable

import numpy as np
import pytest
from xdsl.ir.affine import AffineExpr

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.transforms.axis_split import simplify_divmod
from einc.ir.attrs import AXIS_ATTR, STMT_ATTR
from tests.oracle.compare import check_reference
from tests.oracle.seeds import fresh_seed
from tests.test_device_targets import require, require_run

PROGRAM = """
input input0: float32[1, 8, 6, 6]
input input1: float32[8, 2, 3, 3]
input w4: float32[8, 4, 3, 3]
input dw: float32[8, 3, 3]
input x: float32[16]
input data: float32[4]
output grouped, strided, multiplier, depthwise, uneven, negative, twice, value, halved
grouped[N, F, HO, WO] +=! (input0[N, F // 2 * 2 + C, HO + KH - 1, WO + KW - 1].when(
    [HO + KH - 1 >= 0, HO + KH - 1 < 6, WO + KW - 1 >= 0, WO + KW - 1 < 6], 0.0)
    * input1[F, C, KH, KW]) where HO in 6, WO in 6
strided[N, F, HO, WO] +=! input0[N, F // 4 * 4 + C, HO * 2 + KH, WO * 2 + KW] * w4[F, C, KH, KW] where HO in 2, WO in 2
multiplier[N, F, HO, WO] +=! input0[N, F // 2, HO + KH, WO + KW] * dw[F, KH, KW] where HO in 4, WO in 4
depthwise[N, C, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * dw[C, KH, KW] where HO in 4, WO in 4
uneven[F] = x[F // 4 * 4 + F % 3] where F in 10
negative[F] +=! x[(F - K) % 4] + x[(F - K) // 4 + 1] where F in 8, K in 4
twice[F] = x[F // 8 + F % 2] where F in 16
value[F] = (F // 4 * 10 + F % 4 - 7).cast(`float32`) where F in 12
halved[HO] +=! x[(HO * 2 + KH) // 2] * x[(HO * 2 + 5 - KH) % 3] where HO in 6, KH in 3
data[F % 4] +=. x[F] where F in 16
"""

SPLIT = {"grouped": {"F.q", "F.r"}, "strided": {"F.q", "F.r"}, "multiplier": {"F.q", "F.r"},
         "twice": {"F.q", "F.r.q", "F.r.r"}, "value": {"F.q", "F.r"}, "data_out": {"F.q", "F.r"}}  # fmt: skip
"""The statements whose F loop is split (and the axes it becomes); the others keep theirs."""

REDUCED = {"grouped": 18, "strided": 36, "multiplier": 9, "depthwise": 9, "negative": 4, "halved": 3, "data_out": 5}
"""Reduction lengths (for the float32 tolerance)."""

RUN_TARGETS = ("c", "opencl", "sycl", "hlsl", "poplar", "cuda")
COMPILE_TARGETS = {"cuda": "sm_90", "hip": "gfx90a"}


def conv(x: np.ndarray, w: np.ndarray, groups: int, stride: int = 1, pad: int = 0) -> np.ndarray:
    """A grouped NCHW convolution in float64 (w: F x C/groups x KH x KW)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    f, cpg, kh, kw = w.shape
    ho, wo = (x.shape[2] - kh) // stride + 1, (x.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], f, ho, wo))
    for co in range(f):
        g = co // (f // groups)
        for i in range(kh):
            for j in range(kw):
                window = x[:, g * cpg : (g + 1) * cpg, i : i + stride * ho : stride, j : j + stride * wo : stride]
                out[:, co] += np.einsum("nchw,c->nhw", window, w[co, :, i, j])
    return out


def reference(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x0, x = a["input0"], a["x"]
    f = np.arange(16)
    k = np.arange(4)[None, :]
    neg = f[:8, None] - k
    return {
        "grouped": conv(x0, a["input1"], groups=4, pad=1),
        "strided": conv(x0, a["w4"], groups=2, stride=2)[:, :, :2, :2],
        "multiplier": conv(x0[:, :4], a["dw"][:, None], groups=4)[:, :, :4, :4],
        "depthwise": conv(x0, a["dw"][:, None], groups=8)[:, :, :4, :4],
        "uneven": x[f[:10] // 4 * 4 + f[:10] % 3],
        "negative": (x[neg % 4] + x[neg // 4 + 1]).sum(axis=1),
        "twice": x[f // 8 + f % 2],
        "value": (f[:12] // 4 * 10 + f[:12] % 4 - 7).astype(np.float64),
        "halved": (x[(f[:6, None] * 2 + k[:, :3]) // 2] * x[(f[:6, None] * 2 + 5 - k[:, :3]) % 3]).sum(axis=1),
        "data_out": a["data"] + x.reshape(4, 4).sum(axis=0),
    }


def random_inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = {"input0": (1, 8, 6, 6), "input1": (8, 2, 3, 3), "w4": (8, 4, 3, 3), "dw": (8, 3, 3), "x": (16,), "data": (4,)}
    return {k: (rng.uniform(0.5, 2.0, s) * rng.choice([-1.0, 1.0], s)).astype(np.float32) for k, s in shapes.items()}


@functools.cache
def compilation(target: str) -> Compilation:
    comp = Compilation(PROGRAM, "<index split>", target=target)
    comp.run_until("source")
    return comp


# ---- the simplification keeps every value ----------------------------------------------------------


def _random_expr(rng: random.Random, dims: int, depth: int) -> AffineExpr:
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.7:
            return AffineExpr.dimension(rng.randrange(dims)) * rng.choice([1, 1, 2, 3, 4, -1, 6, 8])
        return AffineExpr.constant(rng.randint(-9, 9))
    a = _random_expr(rng, dims, depth - 1)
    kind = rng.choice(["add", "add", "div", "mod", "mul"])
    if kind == "add":
        return a + _random_expr(rng, dims, depth - 1)
    if kind == "mul":
        return a * rng.choice([2, 3, -2])
    d = AffineExpr.constant(rng.choice([2, 3, 4, 8]))
    return a // d if kind == "div" else a % d


def _evaluate(e: AffineExpr, point: tuple[int, ...]) -> int:
    from xdsl.ir.affine import AffineMap

    return AffineMap(len(point), 0, (e,)).eval(list(point), [])[0]


def test_simplify_divmod_keeps_every_value() -> None:
    """Random expressions with floor divisions and remainders over dims of small ranges
    (some including negatives): the simplified expression equals the original at every
    point; the grouped-convolution forms reduce to no division at all."""
    import itertools

    rng = random.Random(20261127)
    ranges = [(0, 3), (0, 7), (-2, 2)]
    changed = 0
    for _ in range(400):
        e = _random_expr(rng, len(ranges), 3)
        s = simplify_divmod(e, ranges)
        changed += s != e
        for point in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges)):
            assert _evaluate(s, point) == _evaluate(e, point), (e, s, point)
    assert changed > 40, changed
    q, r, c = AffineExpr.dimension(0), AffineExpr.dimension(1), AffineExpr.dimension(2)
    grouped = ((q * 16 + r) // 16) * 16 + c
    assert str(simplify_divmod(grouped, [(0, 3), (0, 15), (0, 15)])) == "((d0 * 16) + d2)"
    assert str(simplify_divmod((q * 4 + r) % 4, [(0, 3), (0, 3)])) == "d1"
    negative = (q * 4 + r - c) // 4  # r - c may be negative: left as written
    assert simplify_divmod(negative, [(0, 3), (0, 3), (0, 3)]) == negative


# ---- where the pass splits ---------------------------------------------------------------------


def test_loops_are_split_only_where_the_divisions_go_away() -> None:
    module = compilation("c").module("loops")
    axes: dict[str, set[str]] = {}
    for op in module.walk():
        if STMT_ATTR in op.attributes and AXIS_ATTR in op.attributes and "einc.init" not in op.attributes:
            axes.setdefault(op.attributes[STMT_ATTR].data, set()).add(op.attributes[AXIS_ATTR].data)  # type: ignore[attr-defined]
    for stmt, found in axes.items():
        f_axes = {a for a in found if a.startswith("F")}
        assert f_axes == SPLIT.get(stmt, f_axes & {"F"}), (stmt, found)
    text = str(module)
    # uneven's and negative's, halved's `KH floordiv 2` (its HO left the division) and `mod 3`
    assert text.count("floordiv") == 3 and text.count(" mod ") == 3, text
    assert re.search(r"%HO_\d+ \+ %KH_\d+ floordiv 2\]", text), text


# ---- every target computes NumPy's numbers ---------------------------------------------------------


@pytest.mark.parametrize("target", [pytest.param(t, marks=[getattr(pytest.mark, t)] if t != "c" else [], id=t)
                                    for t in RUN_TARGETS])  # fmt: skip
def test_target_matches_numpy(target: str) -> None:
    require_run(target)
    comp = compilation(target)
    seed = fresh_seed() % 2**32
    inputs = random_inputs(seed)
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    comp.kernel().run({k: v.copy() for k, v in inputs.items()}, outputs)
    want = reference({k: v.astype(np.float64) for k, v in inputs.items()})
    for name, ref in want.items():
        check_reference(name, outputs[name], ref, "float32", REDUCED.get(name, 1), f"{target}, seed {seed}")


@pytest.mark.parametrize("target", [pytest.param(t, marks=[getattr(pytest.mark, t)], id=t) for t in COMPILE_TARGETS])
def test_device_source_compiles(target: str) -> None:
    require(target)
    comp = compilation(target)
    manifest = comp.target_obj.manifest(comp.module("target"))
    assert manifest is not None
    if target == "cuda":
        from einc.runtime.cuda import compile_check_cuda as check
    else:
        from einc.runtime.hip import compile_check_hip as check
    report = check(comp.source_text(), manifest, COMPILE_TARGETS[target]).check()
    assert {k.name for k in report.kernels} == {k.name for k in manifest.kernels}


# ---- the generated C -----------------------------------------------------------------------------


def _innermost_loops(source: str) -> list[str]:
    """The bodies of the C `for` loops that contain no other loop."""
    bodies = []
    for start in (m.end() for m in re.finditer(r"for \([^)]*\) \{", source)):
        depth, k = 1, start
        while depth:
            depth += {"{": 1, "}": -1}.get(source[k], 0)
            k += 1
        body = source[start : k - 1]
        if "for (" not in body:
            bodies.append(body)
    return bodies


def test_grouped_convolution_c_has_no_division_in_inner_loops() -> None:
    """A 4-group 3x3 convolution written with `F // 16 * 16 + C`: the default C divides
    nowhere in its innermost loops (before the split, `F / 16` was in the vector loop), and
    its vector loop is the unit-stride WO loop."""
    source = Compilation(
        "output0[N, F, HO, WO] +=! input0[N, F // 16 * 16 + C, HO + KH, WO + KW] * input1[F, C, KH, KW]"
        " where HO in 14, WO in 14",
        input_dict={"input0": {"dtype": "float32", "shape": [1, 64, 16, 16]},
                    "input1": {"dtype": "float32", "shape": [64, 16, 3, 3]}},  # fmt: skip
        use_records=False,
    ).source_text()
    inner = _innermost_loops(source)
    assert inner, source
    for body in inner:
        assert not re.search(r"[^/*]/[^/*]|%", body), body
    assert "F_q" in source and "F / 16" not in source, source
    assert "einc_vload" in source or "#pragma omp simd" in source, source


def test_a_schedule_matching_a_split_axis_is_told_the_new_axes() -> None:
    """A schedule written for the axis `F` of a grouped convolution: refused at the match,
    naming the axes the loops stage split `F` into."""
    from einc.errors import ScheduleError
    from einc.schedule.script import Schedule

    schedule = Schedule.parse(
        "transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        '  %f = transform.einc.match stmt "grouped" axis "F" in %root\n'
        "  transform.einc.parallelize %f\n  transform.yield\n}\n", "s.mlir")
    with pytest.raises(ScheduleError, match=r"s\.mlir:2:.*matched no operation \(axis 'F' is divided by a constant "
                                            r"and was split into 'F\.q', 'F\.r' before the schedule"):
        Compilation(PROGRAM, "<index split>", target="c", schedule=schedule).run_until("scheduled")


def test_split_loop_refuses_a_factor_that_does_not_divide_and_keeps_the_ir() -> None:
    from xdsl.dialects import affine

    from einc.transforms.axis_split import split_loop
    from einc.transforms.loop_build import Failure

    module = Compilation("y[F] = x[F // 4] where F in 14", input_dict={"x": {"dtype": "float32", "shape": [4]}},
                         extra_outputs=None).module("loops").clone()  # fmt: skip
    before = str(module)
    (loop,) = [op for op in module.walk() if isinstance(op, affine.ForOp)]
    for d in (3, 1, 16, 0):
        refused = split_loop(loop, d)
        assert isinstance(refused, Failure) and "not a multiple" in refused.message, (d, refused)
    assert str(module) == before


# ---- random division indices ---------------------------------------------------------------------


def _random_index(rng: random.Random) -> tuple[str, Callable[[int, int], int]]:
    """An index over F and K built of floor divisions and remainders by constants (as text,
    and as a Python function with the same floor semantics)."""
    a, b, c = rng.choice([1, 1, 2, 3, 4]), rng.choice([0, 0, 1, -1, 2]), rng.randint(-4, 4)
    d = rng.choice([2, 3, 4, 8])
    op = rng.choice(["//", "%"])
    m, a2, c2, d2, op2 = rng.choice([1, 2, 4, 8]), rng.choice([1, 2]), rng.randint(-2, 2), rng.choice([2, 4]), rng.choice(["//", "%"])
    text = f"((F * {a} + K * {b} + {c}) {op} {d}) * {m} + (F * {a2} + {c2}) {op2} {d2}"

    def value(f: int, k: int) -> int:
        first = (f * a + k * b + c) // d if op == "//" else (f * a + k * b + c) % d
        second = (f * a2 + c2) // d2 if op2 == "//" else (f * a2 + c2) % d2
        return first * m + second

    return text, value


def test_random_division_indices_keep_their_values() -> None:
    """Random indices of floor divisions and remainders by constants over an axis whose extent
    the divisors often divide (guarded where they leave the tensor): the loops stage (after
    einc-split-index-axes), run by the loop interpreter, and the C kernel of some, equal NumPy
    with Python's floor semantics."""
    from einc.semantics.loops import run_interpreted

    rng = random.Random(1127)
    split = 0
    for case in range(24):
        index, value = _random_index(rng)
        extent, reduced = rng.choice([8, 12, 16, 24, 32]), rng.choice([1, 3, 4])
        ir = (f"out[F] +=! x[{index}].when([{index} >= 0, {index} < 64], 0.0) * w[K] "
              f"where F in {extent}, K in {reduced}")  # fmt: skip
        comp = Compilation(ir, input_dict={"x": {"dtype": "float32", "shape": [64]},
                                           "w": {"dtype": "float32", "shape": [reduced]}})  # fmt: skip
        data = np.random.default_rng(case)
        inputs = {"x": data.uniform(-2, 2, 64).astype(np.float32), "w": data.uniform(0.5, 1.5, reduced).astype(np.float32)}
        want = np.zeros(extent)
        for f in range(extent):
            for k in range(reduced):
                i = value(f, k)
                want[f] += (float(inputs["x"][i]) if 0 <= i < 64 else 0.0) * float(inputs["w"][k])
        loops = comp.module("loops")
        split += '.q"' in str(loops)
        got = run_interpreted(loops, inputs)["out"]
        check_reference("out", got, want, "float32", reduced, f"interpreter: {ir}")
        if case % 6 == 0:
            outputs = {"out": poisoned((extent,), "float32")}
            comp.kernel().run(inputs, outputs)
            check_reference("out", outputs["out"], want, "float32", reduced, f"C: {ir}")
    assert split >= 6, split  # the pass did split in a fair share of them
