"""The SIMD lowering (`einc-vectorize-loops`, einc/transforms/vectorize.py) end to end: loops a
schedule marks `einc.vectorize` become vector code on C (GCC vector extensions) and the device
targets, with scalar remainders for trip counts the width does not divide (constant and
`min` bounds from tiling), and give the oracle's answer on random programs; the default C
matmul really gets vector types; casts become `egpu.vconvert` (`__builtin_convertvector`,
`convert_floatN`, lane-wise casts); a loop without a vector form keeps `#pragma omp simd`;
reductions written with the mark by hand (vector accumulators, float sums reassociated)
stay within the differential tests' tolerance.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from xdsl.dialects import affine
from xdsl.parser import Parser

from einc.dialects.context import make_context
from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from einc.runtime.arrays import poisoned
from einc.compiler.registry import run_pipeline
from einc.transforms import loop_transforms as lt
from einc.transforms.loop_analysis import trip_count
from einc.targets.c import CTarget
from einc.targets import description
from tests.oracle.budget import examples
from tests.oracle.compare import check_output
from tests.oracle.genprog import GenProgram, programs
from tests.test_device_differential import run_on_device
from tests.test_device_targets import require

C_LANES = CTarget.vector_lanes()
"""float32 lanes of the C target's vectors on this host (16 with AVX-512, 8 with AVX2)."""

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


def _innermost(module: Any) -> list[affine.ForOp]:
    return [
        op for op in module.walk()
        if isinstance(op, affine.ForOp) and not any(isinstance(o, affine.ForOp) for o in op.body.walk())
    ]  # fmt: skip


def vectorize_schedule(module: Any, rng: random.Random, bind_limit: int | None = None) -> list[str]:
    """In place on a loop-level module: bind each nest's outermost loop to thread.x (device
    targets, when it fits `bind_limit`), tile some innermost loops by a size that may not
    divide them (min bounds), and mark every innermost loop that may be vectorized."""
    done = []
    if bind_limit is not None:
        for top in [op for op in module.walk() if isinstance(op, affine.ForOp)]:
            parent = top.parent_op()
            if isinstance(parent, affine.ForOp) or (trip_count(top) or 0) > bind_limit:
                continue
            if not isinstance(lt.bind_loop(top, "thread.x", bind_limit), lt.Failure):
                done.append("bind")
    for loop in _innermost(module):
        if lt.BIND_ATTR in loop.attributes:
            continue
        if rng.random() < 0.4 and (trip_count(loop) or 0) > 4:
            tiled = lt.tile_loop(loop, rng.choice([3, 5, 8, 12, 16, 20]))
            if not isinstance(tiled, lt.Failure):
                loop = tiled[1]
                done.append("tile")
        if not isinstance(lt.vectorize_loop(loop), lt.Failure):
            done.append("vectorize")
    module.verify()
    return done


def _scheduled(prog: GenProgram, target: str, seed: int, bind: bool) -> Compilation:
    text, input_dict, extra = prog.compile_args()
    comp = Compilation(text, "<random>", input_dict, extra, target, "none")
    module = comp.run_until("loops").clone()
    limit = description(target).max_threads_per_block if bind else None
    done = vectorize_schedule(module, random.Random(seed), limit)
    note(f"program: {text!r}\ninput_dict: {input_dict}\ntransforms: {done}")
    comp.results["scheduled"] = module
    return comp


# ---- fixed kernels (C and every device target) ----------------------------------------------

FIXED = [
    # (program, inputs, axes: outer bound to thread.x, the loops to reorder, inner vectorized;
    #  the float64 answer)
    ("output0[N, M] = input0[N, M] * input1[M] - input0[N, M]",
     {"input0": f32(5, 37), "input1": f32(37)}, ["N", "M"],
     lambda a: a["input0"] * a["input1"] - a["input0"]),
    ("output0[N, M] +=! input0[N, K] * input1[K, M]",
     {"input0": f32(3, 7), "input1": f32(7, 23)}, ["N", "K", "M"],
     lambda a: a["input0"] @ a["input1"]),
    # (a float -> int cast saturates through compares and selects, which have no vector
    # form: such a loop is left to the C compiler, tests/test_casts.py)
    ("output0[N, M] = input0[N, M] * input1[M].cast(`float32`) + (input1[M] * 4).cast(`float32`)",
     {"input0": f32(5, 37), "input1": {"dtype": "int32", "shape": [37]}}, ["N", "M"],
     lambda a: a["input0"] * a["input1"] + a["input1"] * 4),
    # an index through `M // 8` (8 does not divide 37: the loops stage keeps M whole): runs of
    # 8 lanes, one input each (egpu.vbroadcast_runs, the grouped convolution's two-value
    # broadcast), a tail of 5 in a vector of 4 inside one run and a scalar
    ("output0[N, M] = input0[N, M // 8] * input1[N, M] where M in 37",
     {"input0": f32(5, 5), "input1": f32(5, 37)}, ["N", "M"],
     lambda a: a["input0"][:, np.arange(37) // 8] * a["input1"]),
]  # fmt: skip


def _fixed_inputs(inputs: dict[str, Any], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        k: (rng.uniform(-2, 2, v["shape"]) if v["dtype"] == "float32"
            else rng.integers(-9, 10, v["shape"])).astype(v["dtype"])
        for k, v in inputs.items()
    }  # fmt: skip


def _fixed_schedule(axes: list[str]) -> str:
    lines = [f'%{a.lower()} = transform.einc.match stmt "output0" axis "{a}" in %root' for a in axes]
    handles = [f"%{a.lower()}" for a in axes]
    if len(axes) == 3:
        lines.append(f"%r0, %r1, %r2 = transform.einc.reorder {', '.join(handles)}")
        handles = ["%r0", "%r1", "%r2"]
    lines += [f'transform.einc.bind {handles[0]} to "thread.x"', f"transform.einc.vectorize {handles[-1]}"]
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        f"{body}\n  }}\n}}\n"
    )


# ---- C ------------------------------------------------------------------------------------------


@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_random_vectorized_schedules_match_oracle_on_c(prog: GenProgram, seed: int) -> None:
    comp = _scheduled(prog, "c", seed, bind=False)
    kernel = comp.kernel()
    note(f"source:\n{kernel.source}")
    inputs = prog.make_inputs(np.random.default_rng(seed))
    expected = prog.evaluate(inputs)
    outputs = kernel(**{k: v.copy() for k, v in inputs.items()})
    for name, exp in expected.items():
        check_output(name, outputs[name], exp, f"seed {seed}")


def _run_c(comp: Compilation, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    kernel = comp.kernel()
    arrays = {
        i.name: rng.uniform(-2, 2, i.shape).astype(i.dtype) for i in kernel.inputs
    }  # fmt: skip
    return arrays, kernel(**arrays)


@pytest.mark.parametrize("case", range(len(FIXED)))
def test_vectorized_kernels_on_c(case: int) -> None:
    ir, inputs, axes, answer = FIXED[case]
    lines = _fixed_schedule(axes).replace(f'transform.einc.bind %{axes[0].lower()} to "thread.x"\n', "")
    lines = lines.replace('transform.einc.bind %r0 to "thread.x"\n', "")
    comp = Compilation(ir, "<v>", inputs, None, "c", lines)
    kernel = comp.kernel()
    assert f"einc_f32x{C_LANES}" in kernel.source and "omp simd" not in kernel.source
    if "// 8" in ir:  # runs of 8 lanes, one load each: two in a vector of 16, one (a broadcast) in 8
        assert (f"einc_vbroadcast_runs{C_LANES // 8}_f32x{C_LANES}(" in kernel.source) == (C_LANES > 8), kernel.source
    arrays = _fixed_inputs(inputs, 6)
    got = kernel(**arrays)["output0"]
    want = answer({k: v.astype(np.float64) for k, v in arrays.items()})
    assert max_error(got, want) <= tolerance("float32"), kernel.source


@pytest.mark.parametrize("m", [45, 63, 7])
def test_remainders_in_narrower_vectors_on_c(m: int) -> None:
    """A row of `m` floats: whole vectors of the host's width, then the remainder in halves
    (8, 4, 2 lanes: the width is capped by its constant trip count), then at most one scalar
    element; against NumPy."""
    ir = "output0[N, M] = input0[N, M] * input1[M] + input0[N, M].call(`exp`)"
    comp = Compilation(ir, "<v>", {"input0": f32(3, m), "input1": f32(m)}, None, "c")
    arrays, got = _run_c(comp, np.random.default_rng(2))
    source = comp.results["source"]
    rest, widths = m % C_LANES, []
    while rest >= 2:
        width = 1 << (rest.bit_length() - 1)
        widths.append(width)
        rest -= width
    for width in widths:
        assert f"einc_vload_f32x{width}(" in source, source
    assert (f"for (int64_t M = {m - 1}; M < {m}; M++)" in source) == (rest == 1), source
    x = arrays["input0"].astype(np.float64)
    want = x * arrays["input1"] + np.exp(x)
    assert max_error(got["output0"], want) <= tolerance("float32")


@pytest.mark.parametrize("n, k, m", [(128, 64, 128), (64, 64, 100)])
def test_default_matmul_is_vectorized_on_c(n: int, k: int, m: int) -> None:
    comp = Compilation(MATMUL, "<mm>", {"input0": f32(n, k), "input1": f32(k, m)}, None, "c")
    arrays, got = _run_c(comp, np.random.default_rng(1))
    source = comp.results["source"]
    assert f"typedef float einc_f32x{C_LANES} __attribute__((vector_size({4 * C_LANES})));" in source
    assert f"einc_vload_f32x{C_LANES}(" in source and f"einc_vstore_f32x{C_LANES}(" in source
    want = arrays["input0"].astype(np.float64) @ arrays["input1"].astype(np.float64)
    assert max_error(got["output0"], want) <= tolerance("float32")


def test_gather_falls_back_to_the_pragma() -> None:
    """A transpose read (stride 37 in the vectorized loop) has no vector form: the loop keeps
    its mark, C prints `omp simd`, the result is right."""
    schedule = (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        '    %m = transform.einc.match stmt "output0" axis "M" in %root\n'
        "    transform.einc.vectorize %m\n    transform.yield\n  }\n}\n"
    )
    comp = Compilation("output0[N, M] = input0[M, N] + 1.0", "<t>", {"input0": f32(37, 29)},
                       None, "c", schedule)  # fmt: skip
    arrays, got = _run_c(comp, np.random.default_rng(2))
    source = comp.results["source"]
    assert "#pragma omp simd" in source and "einc_f32x" not in source
    assert np.array_equal(got["output0"], arrays["input0"].T + np.float32(1))


# ---- device targets -----------------------------------------------------------------------------


@pytest.mark.opencl
@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_random_vectorized_schedules_match_oracle_on_opencl(prog: GenProgram, seed: int) -> None:
    require("opencl")
    comp = _scheduled(prog, "opencl", seed, bind=True)
    comp.run_until("source")
    note(f"source:\n{comp.results['source']}")
    inputs = prog.make_inputs(np.random.default_rng(seed))
    expected = prog.evaluate(inputs)
    outputs = run_on_device(comp, inputs)
    for name, exp in expected.items():
        check_output(name, outputs[name], exp, f"opencl, seed {seed}")


@pytest.mark.parametrize("target", [
    pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "hlsl", "sycl", "poplar")
])  # fmt: skip
@pytest.mark.parametrize("case", range(len(FIXED)))
def test_vectorized_kernels_on_device_targets(target: str, case: int) -> None:
    require(target)
    ir, inputs, axes, answer = FIXED[case]
    comp = Compilation(ir, "<v>", inputs, None, target, _fixed_schedule(axes))
    comp.run_until("source")
    source = comp.results["source"]
    width = {"opencl": "float16", "hlsl": "float4", "sycl": "einc_f32x16", "poplar": "einc_f32x2"}
    assert width[target] in source, source
    if "// 8" in ir and target in ("opencl", "sycl"):  # 16 lanes: two runs of 8
        assert "vbroadcast_runs2" in source, source
    arrays = _fixed_inputs(inputs, 3)
    got = run_on_device(comp, arrays)["output0"]
    want = answer({k: v.astype(np.float64) for k, v in arrays.items()})
    assert max_error(got, want) <= tolerance("float32"), source


# ---- reductions (the mark written by hand) -------------------------------------------------------

REDUCE_C = """
func.func @reduce(%x: memref<4x1000x{t}> {{ein.name = "x"}}, %s: memref<4x{t}> {{ein.name = "s", ein.output}}) {{
  %one = arith.constant {one} : {t}
  affine.for %n = 0 to 4 {{
    affine.store %one, %s[%n] : memref<4x{t}>
    affine.for %c = 0 to 1000 {{
      %v = affine.load %x[%n, %c] : memref<4x1000x{t}>
      %old = affine.load %s[%n] : memref<4x{t}>
      %new = {op} %old, %v : {t}
      affine.store %new, %s[%n] : memref<4x{t}>
    }} {{einc.vectorize}}
  }}
  func.return
}}
"""

REDUCE_OPENCL = """
func.func @host(%x: memref<4x1000x{t}> {{ein.name = "x"}}, %s: memref<4x{t}> {{ein.name = "s", ein.output}}) {{
  egpu.launch @reduce(%x, %s) : memref<4x1000x{t}>, memref<4x{t}>
  func.return
}}
egpu.func @reduce(%x: memref<4x1000x{t}>, %s: memref<4x{t}>) grid [1, 1, 1] block [4, 1, 1] {{
  %n = egpu.thread_id x
  %one = arith.constant {one} : {t}
  affine.store %one, %s[%n] : memref<4x{t}>
  affine.for %c = 0 to 1000 {{
    %v = affine.load %x[%n, %c] : memref<4x1000x{t}>
    %old = affine.load %s[%n] : memref<4x{t}>
    %new = {op} %old, %v : {t}
    affine.store %new, %s[%n] : memref<4x{t}>
  }} {{einc.vectorize}}
  egpu.return
}}
"""

REDUCTIONS = {
    "addf": (np.add, "float32"), "mulf": (np.multiply, "float32"),
    "maximumf": (np.maximum, "float32"), "minimumf": (np.minimum, "float64"),
    "addi": (np.add, "int32"), "muli": (np.multiply, "int64"), "maxsi": (np.maximum, "int64"),
    "minsi": (np.minimum, "int32"),
}  # fmt: skip


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=pytest.mark.opencl)])
@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_hand_marked_reductions(target: str, op: str) -> None:
    """Vector accumulators (1000 = 62 * 16 + 8 on both targets): integers exact, float
    min/max exact, float sums and products reassociated within float32's tolerance."""
    if target != "c":
        require(target)
    from einc.targets import get_all_targets

    ufunc, dtype = REDUCTIONS[op]
    t = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}[dtype]
    one = "1.0" if dtype.startswith("float") else "1"
    text = (REDUCE_C if target == "c" else REDUCE_OPENCL).format(t=t, op=f"arith.{op}", one=one)
    module = Parser(make_context(), text).parse_module()
    run_pipeline(make_context(), module, f"einc-vectorize-loops{{target={target}}},canonicalize,cse")
    assert "egpu.vreduce" in str(module)
    target_class = get_all_targets()[target]()
    source = target_class.emit(module)
    rng = np.random.default_rng(4)
    if dtype.startswith("float"):
        # products of 1000 factors near 1 stay finite; a NaN checks max/min propagate it
        x = rng.uniform(0.999, 1.001, (4, 1000)) if op == "mulf" else rng.uniform(-3, 3, (4, 1000))
        if op in ("maximumf", "minimumf"):
            x[2, 7] = np.nan
    else:
        x = rng.integers(-3, 4, (4, 1000)) if op == "muli" else rng.integers(-1000, 1000, (4, 1000))
        if op == "muli":
            x[:, 20:] = np.where(x[:, 20:] == 0, 1, np.sign(x[:, 20:]))  # no overflow, no zero
    x = x.astype(dtype)
    s = np.ones(4, dtype)  # the kernel fills its output with 1 first
    want = ufunc(s.astype(np.float64) if dtype.startswith("float") else s, ufunc.reduce(
        x.astype(np.float64) if dtype.startswith("float") else x, axis=1))  # fmt: skip
    if target == "c":
        runner = target_class.build(source, module)
        outputs = {"s": poisoned((4,), dtype)}
        runner({"x": x}, outputs)
    else:
        from einc.runtime.opencl import load_opencl_kernel

        outputs = {"s": poisoned((4,), dtype)}
        load_opencl_kernel(source, target_class.manifest(module))({"x": x}, outputs)
    got = outputs["s"]
    if dtype.startswith("int") or op in ("maximumf", "minimumf"):
        assert np.array_equal(got, want.astype(dtype), equal_nan=dtype.startswith("float")), (got, want)
    else:
        assert max_error(got, want) <= tolerance("float32"), (got, want)


@pytest.mark.parametrize("target, arch", [
    pytest.param("cuda", "sm_90", marks=pytest.mark.cuda),
    pytest.param("hip", "gfx90a", marks=pytest.mark.hip),
])  # fmt: skip
@pytest.mark.parametrize("case", range(len(FIXED)))
def test_vectorized_kernels_compile_for_cuda_and_hip(target: str, arch: str, case: int) -> None:
    """CUDA and HIP print a struct of lanes with lane-wise helpers (CUDA's float4 has no
    operators); the compilers accept them (run on a GPU where there is one)."""
    require(target)
    ir, inputs, axes, answer = FIXED[case]
    comp = Compilation(ir, "<v>", inputs, None, target, _fixed_schedule(axes))
    source = comp.run_until("source")
    assert "struct einc_f32x4 { float v[4]; };" in source
    manifest = comp.target_obj.manifest(comp.results["target"])
    if target == "cuda":
        from einc.runtime.cuda import compile_check_cuda as check
    else:
        from einc.runtime.hip import compile_check_hip as check
    report = check(source, manifest, arch).check()
    assert {k.name for k in report.kernels} == {k.name for k in manifest.kernels}
    from einc.targets.toolchains import available

    if target == "cuda" and available("cuda-gpu")[0]:
        from einc.runtime.cuda import load_cuda_kernel

        arrays = _fixed_inputs(inputs, 5)
        outputs = {"output0": poisoned(comp.program.outputs[0].shape, "float32")}
        load_cuda_kernel(source, manifest)(arrays, outputs)
        want = answer({k: v.astype(np.float64) for k, v in arrays.items()})
        assert max_error(outputs["output0"], want) <= tolerance("float32"), source


MATH = "output0[N, M] = (input0[N, M] - input1[M]).call(`exp`) + input0[N, M].call(`sqrt`)"
MATH_INPUTS = {"input0": f32(5, 37), "input1": f32(37)}


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=pytest.mark.opencl)])
def test_math_vectorizes_only_where_the_target_has_vector_math(target: str) -> None:
    """OpenCL's exp/sqrt are overloaded for floatN: the loop becomes vector code. C has no
    vector libm spelling: the loop stays scalar with `#pragma omp simd`. Both match NumPy."""
    if target != "c":
        require(target)
    schedule = _fixed_schedule(["N", "M"])
    if target == "c":
        schedule = schedule.replace('transform.einc.bind %n to "thread.x"\n', "")
    comp = Compilation(MATH, "<math>", MATH_INPUTS, None, target, schedule)
    source = comp.run_until("source")
    if target == "c":
        assert "#pragma omp simd" in source and "einc_f32x" not in source
    else:
        assert "exp(v - v_1)" in source and "float16" in source, source
    arrays = {k: np.random.default_rng(7).uniform(0, 3, v["shape"]).astype(np.float32)
              for k, v in MATH_INPUTS.items()}  # fmt: skip
    if target == "c":
        got = comp.kernel()(**arrays)["output0"]
    else:
        got = run_on_device(comp, arrays)["output0"]
    x, y = arrays["input0"].astype(np.float64), arrays["input1"].astype(np.float64)
    assert max_error(got, np.exp(x - y) + np.sqrt(x)) <= tolerance("float32"), source


LIBMVEC = {"exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tanh": np.tanh}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", sorted(LIBMVEC))
def test_c_vector_math_through_libmvec(fn: str, dtype: str) -> None:
    """exp/log/sin/cos/tanh on C vectorize as lane-wise helpers over `__simd__`-declared
    libm functions (gcc calls libmvec): within float tolerance of NumPy on ordinary inputs,
    and NaN, infinities, 0 and out-of-range arguments give what the scalar functions give."""
    n = 203  # 12 vectors of 16 floats (or 25 of 8 doubles) and a scalar remainder
    comp = Compilation(f"output0[N] = input0[N].call(`{fn}`)", "<m>", {"input0": {"dtype": dtype, "shape": [n]}},
                       None, "c", _fixed_schedule(["N"]).replace('transform.einc.bind %n to "thread.x"\n', ""))
    kernel = comp.kernel()
    assert f"einc_v{fn}_" in kernel.source and '__attribute__((__simd__("notinbranch")))' in kernel.source
    rng = np.random.default_rng(3)
    x = rng.uniform(0.01, 20, n) if fn == "log" else rng.uniform(-20, 20, n)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0, -100.0, 1e30, -1e30, 1e-40]
    x[: len(special)] = special
    x = x.astype(dtype)
    with np.errstate(all="ignore"):
        want = LIBMVEC[fn](x.astype(np.float64))
        scalar = LIBMVEC[fn](x)
    got = kernel(input0=x)["output0"]
    ordinary = slice(len(special), None)
    assert max_error(got[ordinary], want[ordinary]) <= tolerance(dtype), kernel.source
    # special values: the same class of result as NumPy's scalar float (NaN, inf, 0 exact)
    for k in range(len(special)):
        if not np.isfinite(scalar[k]) or scalar[k] == 0:
            assert np.array_equal(got[k], scalar[k], equal_nan=True), (k, x[k], got[k], scalar[k])
        else:
            assert abs(float(got[k]) - float(scalar[k])) <= 1e-5 * max(1.0, abs(float(scalar[k]))), (k, x[k], got[k])


# ---- an invariant guarded load (a padded input broadcast over the vector loop) -------------------

GUARDED = "output0[N, M] = input0[N - 1].when([N - 1 >= 0], 0.0) * input1[N, M]"
GUARDED_VARYING = "output0[N, M] = input0[N, M - 1].when([M - 1 >= 0], 0.0) * 2.0 where M in 37"


def _vectorize_m() -> str:
    return (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        '    %m = transform.einc.match stmt "output0" axis "M" in %root\n'
        "    transform.einc.vectorize %m\n    transform.yield\n  }\n}\n"
    )


@pytest.mark.parametrize("target", [
    "c", *(pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "hlsl", "sycl", "poplar"))
])  # fmt: skip
def test_an_invariant_guarded_load_is_broadcast_in_the_vector_loop(target: str) -> None:
    """A guarded load that does not depend on the vectorized loop (`scf.if` on N only) is
    cloned as scalars into the vector body and broadcast: the loop is vector code, not a
    scalar loop with `omp simd`; rows whose guard fails read the default."""
    if target != "c":
        require(target)
    inputs = {"input0": f32(5), "input1": f32(5, 37)}
    comp = Compilation(GUARDED, "<t>", inputs, None, target, _vectorize_m())
    source = comp.run_until("source")
    if target == "c":
        assert f"einc_f32x{C_LANES}" in source and "#pragma omp simd" not in source, source
        arrays, outs = _run_c(comp, np.random.default_rng(4))
    else:
        arrays = _fixed_inputs(inputs, 4)
        outs = run_on_device(comp, arrays)
    got = outs["output0"]
    x = arrays["input0"].astype(np.float64)
    shifted = np.concatenate([[0.0], x[:-1]])
    want = shifted[:, None] * arrays["input1"].astype(np.float64)
    assert max_error(got, want) <= tolerance("float32"), source


def test_a_guard_that_varies_with_the_vector_loop_keeps_the_pragma() -> None:
    """A guard on the vectorized loop's variable is a condition per lane: no vector form (C
    prints `omp simd`), the result is right."""
    comp = Compilation(GUARDED_VARYING, "<t>", {"input0": f32(3, 37)}, None, "c", _vectorize_m())
    arrays, got = _run_c(comp, np.random.default_rng(5))
    source = comp.results["source"]
    assert "#pragma omp simd" in source and "einc_f32x" not in source, source
    x = arrays["input0"].astype(np.float64)
    want = np.concatenate([np.zeros((3, 1)), x[:, :-1]], axis=1) * 2.0
    assert max_error(got["output0"], want) <= tolerance("float32")
