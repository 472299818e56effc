"""Device targets: every program of tests/programs.py compiled for each of them, executed and
compared with its NumPy reference on OpenCL (PoCL), HLSL (glslang -> SPIR-V -> lavapipe),
SYCL (Intel's OpenCL CPU device), Poplar (einc's CPU mirror) and CUDA where an NVIDIA GPU is
(`require_run`), compile-checked for CUDA (sm_80, sm_90, NVRTC) and HIP (gfx90a, gfx1030).

A missing toolchain skips its tests with the reason (einc.targets.toolchains), and fails
them when CI=true. Programs a target cannot express are checked to be refused with a
TargetError saying why (Poplar: no float64, refused before any
lowering), never miscompiled. HLSL computes int64 as uint64_t with signed helpers, and its
float64 math with einc's own functions (einc/targets/hlsl_math.py).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from einc.compiler.driver import Compilation
from einc.schedule.choice import ScheduleChoice
from einc.runtime.arrays import poisoned
from einc.errors import EincError, TargetError
from einc.runtime.manifest import LaunchManifest
from tests.test_conformance import ALL, Program, check_against_reference, fresh_seed, random_inputs

EXECUTED = ("opencl", "hlsl", "sycl", "poplar", "cuda")
COMPILED = {"cuda": ("sm_80", "sm_90"), "hip": ("gfx90a", "gfx1030")}

UNSUPPORTED: dict[str, dict[str, str]] = {
    "poplar": {
        name: r"poplar target: float64 (tensor '\w+'|value) is not supported"
        for name in ("float64_math", "axis_val_and_dtype", "scalar_file")
    },
}
"""Programs a target refuses, and a phrase of the TargetError it raises."""


def require(target: str) -> None:
    """Skip (or, in CI, fail) when the target's toolchain is missing here (C needs none)."""
    from einc.targets.toolchains import available, required

    if target == "c":
        return
    ok, reason = available(target)
    if ok:
        return
    if required(target):
        pytest.fail(f"toolchain for {target} missing in CI: {reason}")
    pytest.skip(f"{target}: {reason}")


def require_run(target: str) -> None:
    """`require`, and for CUDA an NVIDIA GPU and its driver too (hardware: skipped even in CI)."""
    require(target)
    if target == "cuda":
        require("cuda-gpu")


@functools.cache
def compilation(target: str, name: str) -> Compilation:
    prog = next(p for p in ALL if p.name == name)
    comp = Compilation(prog.ir, f"<{name}>", prog.input_dict, prog.extra_outputs, target)
    comp.run_until("source")
    return comp


def compiled(target: str, name: str) -> tuple[str, ModuleOp, LaunchManifest, Any]:
    comp = compilation(target, name)
    module = comp.results["target"]
    return comp.results["source"], module, comp.target_obj.manifest(module), comp.target_obj


def supported(target: str) -> list[Program]:
    return [p for p in ALL if p.name not in UNSUPPORTED.get(target, {})]


def cases(targets: tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(t, p, marks=getattr(pytest.mark, t), id=f"{t}-{p.name}") for t in targets for p in supported(t)
    ]


# ---- executed ------------------------------------------------------------------------------


@pytest.mark.parametrize(("target", "prog"), cases(EXECUTED))
def test_program_runs_and_matches_reference(target: str, prog: Program) -> None:
    require_run(target)
    source, module, _, target_obj = compiled(target, prog.name)
    runner = target_obj.build(source, module)
    seed = fresh_seed()
    inputs = random_inputs(prog, seed)
    program = compilation(target, prog.name).program
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in program.outputs}
    runner({k: v.copy() for k, v in inputs.items()}, outputs)
    check_against_reference(prog, outputs, inputs, seed)


# ---- compile-checked -----------------------------------------------------------------------


@pytest.mark.parametrize(("target", "prog"), cases(tuple(COMPILED)))
def test_program_compiles(target: str, prog: Program) -> None:
    require(target)
    source, _, manifest, _ = compiled(target, prog.name)
    if target == "cuda":
        from einc.runtime.cuda import compile_check_cuda as check
    else:
        from einc.runtime.hip import compile_check_hip as check
    for arch in COMPILED[target]:
        report = check(source, manifest, arch).check()
        assert {k.name for k in report.kernels} == {k.name for k in manifest.kernels}, arch


# ---- refusals, manifests, limits ------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "name", "phrase"),
    [(t, n, why) for t, names in UNSUPPORTED.items() for n, why in names.items()],
)
def test_unsupported_program_is_refused(target: str, name: str, phrase: str) -> None:
    with pytest.raises(EincError, match=phrase):
        compiled(target, name)


def test_dtype_refusal_names_the_tensor_at_its_source_location() -> None:
    """Before any lowering: the tensor, its dtype and where the program reads it."""
    program = "input x: float32[4]\ninput big: float64[4]\ny[N] = x[N] + big[N].cast(`float32`)\n"
    with pytest.raises(TargetError) as info:
        Compilation(program, "prog.ein", target="poplar").run_until("target")
    err = info.value
    assert err.loc is not None and (err.loc.file, err.loc.line, err.loc.col) == ("prog.ein", 3, 15)
    assert "poplar target: float64 tensor 'big' is not supported" in err.message
    assert "no double precision" in err.message
    value = "input x: float32[4]\ny[N] = (x[N].cast(`float64`) * 3).cast(`float32`)\n"
    with pytest.raises(TargetError, match="poplar target: float64 value is not supported"):
        Compilation(value, "prog.ein", target="poplar").run_until("target")


@pytest.mark.parametrize("target", dict.fromkeys([*EXECUTED, *COMPILED]))
def test_manifest_describes_every_buffer_and_launch(target: str) -> None:
    source, _, manifest, _ = compiled(target, "softmax")
    assert manifest.target == target
    roles = {b.name: b.role for b in manifest.buffers}
    assert roles == {"input0": "input", "output0": "output", "temp0": "temp", "temp1": "temp"}
    # a statement's kernels in program order: its fill (where the default schedule keeps the
    # reduction's accumulator in a register) and its computation `kernel_<stmt>_1`
    stmts = [re.sub(r"_\d+$", "", k.name) for k in manifest.kernels]
    assert list(dict.fromkeys(stmts)) == ["kernel_temp0", "kernel_temp1", "kernel_output0"], stmts
    for k in manifest.kernels:
        assert k.name in source
        assert set(k.args) <= set(roles)
        assert np.prod(k.global_size) >= 1
    assert LaunchManifest.from_json(manifest.to_json()) == manifest


def test_hlsl_manifest_records_widened_storage_and_bindings() -> None:
    _, _, manifest, _ = compiled("hlsl", "mixed_promotion")
    storage = {b.name: (b.dtype, b.storage_dtype) for b in manifest.buffers}
    assert storage == {
        "input0": ("int8", "int32"), "input1": ("int16", "int32"),
        "input2": ("float16", "float32"), "output0": ("float16", "float32"),
    }  # fmt: skip
    assert [b.binding for b in manifest.buffers] == [0, 1, 2, 3]


def test_cli_writes_the_manifest_beside_the_source(tmp_path: Path) -> None:
    from einc.cli import main

    out = tmp_path / "softmax.cl"
    assert main(["compile", "examples/softmax.ein", "-t", "opencl", "-o", str(out)]) == 0
    manifest = LaunchManifest.from_json((tmp_path / "softmax.cl.json").read_text())
    assert "__kernel void kernel_output0(" in out.read_text()
    # the default schedule's: 4 work-groups of 64 work-items, 4 elements each, per row of 64
    assert manifest.kernels[-1].grid == (4, 64, 1)
    assert json.loads((tmp_path / "softmax.cl.json").read_text())["target"] == "opencl"


def test_c_target_writes_no_manifest(tmp_path: Path) -> None:
    from einc.cli import main

    out = tmp_path / "softmax.c"
    assert main(["compile", "examples/softmax.ein", "-t", "c", "-o", str(out)]) == 0
    assert not (tmp_path / "softmax.c.json").exists()


BOUND = """
func.func @kernel(%A: memref<4096xf32> {ein.name = "A"}, %B: memref<4096xf32> {ein.name = "B", ein.output}) {
  affine.for %i = 0 to 4096 {
    %a = affine.load %A[%i] : memref<4096xf32>
    affine.store %a, %B[%i] : memref<4096xf32>
  } {einc.bind = "thread.x"}
  func.return
}
"""


@pytest.mark.parametrize("target", ["cuda", "hip", "hlsl", "poplar"])
def test_launch_over_the_thread_limit_is_refused_before_printing(target: str) -> None:
    from xdsl.parser import Parser

    from einc.dialects.context import make_context
    from einc.compiler.driver import resolve_target
    from einc.compiler.registry import run_pipeline
    from einc.passes.pipeline import LOOPS_PIPELINE

    ctx = make_context()
    module = Parser(ctx, BOUND).parse_module()
    target_obj = resolve_target(target)
    run_pipeline(ctx, module, f"{LOOPS_PIPELINE},{target_obj.pipeline}")
    with pytest.raises(TargetError, match="4096 threads per block"):
        target_obj.emit(module)


def test_large_flat_launch_strides_over_a_capped_grid() -> None:
    """HLSL dispatches at most 65535 groups per dimension: more points stride."""
    source, _, manifest, _ = compiled_text("hlsl", "output0[N] = input0[N] * 2.0",
                                           {"input0": {"dtype": "float32", "shape": [65535 * 64 + 5]}})  # fmt: skip
    assert manifest.kernels[0].grid == (65535, 1, 1)
    assert "N += 4194240" in source


def compiled_text(target: str, ir: str, input_dict: dict[str, Any]) -> tuple[str, ModuleOp, LaunchManifest, Any]:
    comp = Compilation(ir, "<t>", input_dict, None, target)
    source = comp.run_until("source")
    module = comp.results["target"]
    return source, module, comp.target_obj.manifest(module), comp.target_obj


# ---- Poplar over many tiles ------------------------------------------------------------------


def _poplar_runner(ir: str, input_dict: dict[str, Any]) -> tuple[Any, Compilation]:
    """Unscheduled: an output element per point (Poplar's default register-tiles a contraction)."""
    comp = Compilation(ir, "<tiles>", input_dict, None, "poplar", ScheduleChoice.NONE)
    source = comp.run_until("source")
    return comp.target_obj.build(source, comp.results["target"]), comp


def _check_owned_slices(records: list[Any], output: str, size: int, word_elements: int = 1) -> None:
    """The vertices' slices of `output` are disjoint, cover it, each on its own tile."""
    slices = sorted((r.fields[output].first, r.fields[output].last) for r in records)
    assert slices[0][0] == 0 and slices[-1][1] == size - 1
    for (_, last), (first, _) in zip(slices, slices[1:]):
        assert first == last + 1
    assert all(first % word_elements == 0 for first, _ in slices)
    assert all(r.fields[output].writes for r in records)
    assert len({r.tile for r in records}) == len(records)


def test_large_poplar_kernel_runs_on_many_tiles() -> None:
    """The graph the mirror records: a 64x128 matmul's output spread over one vertex per
    tile, each writing only its own slice and connected to the rows of input0 its points
    read and to the range of input1 they read; the result is NumPy's."""
    require("poplar")
    runner, _ = _poplar_runner(
        "output0[N, M] +=! input0[N, K] * input1[K, M]",
        {"input0": {"dtype": "float32", "shape": [64, 32]},
         "input1": {"dtype": "float32", "shape": [32, 128]}},  # fmt: skip
    )
    records = [r for r in runner.graph() if r.compute_set == "kernel_output0"]
    assert len(records) > 100
    _check_owned_slices(records, "output0", 64 * 128)
    for r in records:
        rows = r.fields["output0"].first // 128, r.fields["output0"].last // 128
        assert (r.fields["input0"].first, r.fields["input0"].last) == (rows[0] * 32, rows[1] * 32 + 31)
        assert r.fields["input1"].count <= 32 * 128
    assert min(r.fields["input1"].count for r in records) < 32 * 128
    rng = np.random.default_rng(fresh_seed())
    a, b = rng.standard_normal((64, 32)), rng.standard_normal((32, 128))
    out = poisoned((64, 128), "float32")
    runner({"input0": a.astype(np.float32), "input1": b.astype(np.float32)}, {"output0": out})
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_poplar_byte_outputs_split_on_word_boundaries() -> None:
    """int8 elements share 32-bit words: every vertex's slice starts on a word (13253 points
    over 1472 tiles would give 10-point ranges; they are rounded up to 12)."""
    require("poplar")
    runner, _ = _poplar_runner(
        "output0[N] = input0[N] * 3 + 1", {"input0": {"dtype": "int8", "shape": [13253]}}
    )
    records = runner.graph()
    assert len(records) > 10
    _check_owned_slices(records, "output0", 13253, word_elements=4)
    x = np.random.default_rng(fresh_seed()).integers(-128, 128, 13253).astype(np.int8)
    out = poisoned((13253,), "int8")
    runner({"input0": x}, {"output0": out})
    np.testing.assert_array_equal(out, (x * 3 + 1).astype(np.int8))


_WORD_RACE = """
#include <poplar/Vertex.hpp>
class EincByte : public poplar::Vertex {
public:
  poplar::Output<poplar::Vector<signed char>> out;
  bool compute() { out[0] = 7; return true; }
};
#ifdef EINC_POPLAR_HOST
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
EINC_POPLAR_VERTEX(EincByte, out)
void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers,
                      poplar::program::Sequence &prog) {
  graph.setTileMapping(buffers[0], 0);
  poplar::ComputeSet cs = graph.addComputeSet("bytes");
  for (unsigned k = 0; k < 2; ++k) {
    poplar::VertexRef v = graph.addVertex(cs, "EincByte", {{"out", buffers[0].slice(k, k + 1)}});
    graph.setTileMapping(v, k);
  }
  prog.add(poplar::program::Execute(cs));
}
#endif
"""


def test_poplar_mirror_refuses_two_vertices_writing_one_word() -> None:
    """Distinct int8 elements of one 32-bit word, written from two tiles: a race on the IPU."""
    require("poplar")
    from einc.errors import ToolchainError
    from einc.runtime.manifest import Buffer, KernelLaunch
    from einc.runtime.poplar import load_poplar_kernel

    manifest = LaunchManifest(
        "poplar", (Buffer("out", "int8", (4,), "output"),),
        (KernelLaunch("bytes", ("out",), (1, 1, 1), (1, 1, 1)),),
    )  # fmt: skip
    runner = load_poplar_kernel(_WORD_RACE, manifest)
    with pytest.raises(ToolchainError, match="both write the 32-bit word"):
        runner({}, {"out": np.zeros(4, np.int8)})


# ---- HLSL int64 (uint64_t with signed helpers) --------------------------------------------------

_HLSL_INT64 = """
input a: int64[64]
input b: int64[64]
input f: float32[64]
input i: int32[64]
output pick, mx, mn, sh, tof, fromf, arith, ext, widened, big
pick[N] = a[N].when([a[N] < b[N]], b[N])
mx[] >=! a[N]
mn[] <=! a[N]
sh[N] = a[N] >> 3
tof[N] = a[N].cast(`float32`)
fromf[N] = f[N].cast(`int64`)
arith[N] = a[N] * b[N] + a[N] // 7 - a[N] % 5
ext[N] = i[N].cast(`int64`) * 3000000
widened[N] = i[N].cast(`int64`) // 3 + (i[N].cast(`int64`) >> 40)
big[N] = a[N] + 5000000000 - const(-7000000000, `int64`)
"""


def test_hlsl_int64_beyond_32_bits_matches_numpy() -> None:
    """Signed compares, max/min reductions (INT64_MIN/MAX identities), arithmetic shifts,
    conversions to and from float, sign extension (then divided: naga once miscompared an
    implicitly widened int) and 64-bit literals, on values that need all 64 bits (MIN, MAX,
    -1 included)."""
    require("hlsl")
    rng = np.random.default_rng(fresh_seed())
    a, b = rng.integers(-(2**62), 2**62, 64), rng.integers(-(2**40), 2**40, 64)
    a[:4], b[4:8] = [-(2**63), 2**63 - 1, -1, 0], a[4:8]
    f = (rng.standard_normal(64) * 10.0 ** rng.integers(0, 15, 64)).astype(np.float32)
    f[:3] = [-0.5, 0.7, -3.99]
    i = rng.integers(-(2**31), 2**31, 64).astype(np.int32)
    kernel = Compilation(_HLSL_INT64, "<int64>", target="hlsl").kernel()
    out = kernel(a=a, b=b, f=f, i=i)
    with np.errstate(over="ignore"):
        want = {
            "pick": np.where(a < b, a, b), "mx": a.max(), "mn": a.min(), "sh": a >> 3,
            "tof": a.astype(np.float32), "fromf": f.astype(np.int64),
            "arith": a * b + a // 7 - a % 5, "ext": i.astype(np.int64) * 3000000,
            "widened": i.astype(np.int64) // 3 + (i.astype(np.int64) >> 40),
            "big": a + 5000000000 + 7000000000,
        }  # fmt: skip
    for name, value in want.items():
        np.testing.assert_array_equal(out[name], value, err_msg=name)
