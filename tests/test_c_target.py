"""The C target and runtime: the shared ein programs compiled with the system compiler and
run on NumPy arrays, against the float64 NumPy references of tests/test_lowering.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_lowering import CASE_IDS, CASES, MATMUL, PAD, Case, check_outputs, lower, parse

from einc.dialects.context import make_context
from einc.errors import InternalCompilerError, RuntimeInputError, ToolchainError
from einc.compiler.registry import run_pipeline
from einc.runtime.c import CKernel, compile_c, load_c_kernel, native_vector_bits
from einc.runtime.signature import KernelSignature
from einc.passes.pipeline import LOOPS_PIPELINE
from einc.targets import get_all_targets
from einc.targets.c import CTarget

C_LOWERING = f"{LOOPS_PIPELINE},{CTarget.pipeline}"
"""The C target's passes from the `ein` level (the driver runs them as two stages)."""


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EINC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "einc-cache"))


def to_c(text: str) -> tuple[str, KernelSignature]:
    module = parse(text)
    run_pipeline(make_context(), module, C_LOWERING)
    module.verify()
    return CTarget.emit(module), KernelSignature.from_module(module)


def build(text: str) -> CKernel:
    source, signature = to_c(text)
    return load_c_kernel(source, signature)


def poisoned(kernel: CKernel) -> dict[str, np.ndarray]:
    outputs = {}
    for spec in kernel.signature.outputs:
        array = np.empty(spec.shape, spec.dtype)
        if array.dtype.kind == "f":
            array.fill(np.nan)
        else:
            array.view(np.uint8).fill(0xA5)
        outputs[spec.name] = array
    return outputs


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_c_matches_numpy(case: Case) -> None:
    kernel = build(case.ir)
    inputs = case.inputs(np.random.default_rng(11))
    outputs = poisoned(kernel)
    got = kernel.run(inputs, outputs)
    for name, array in got.items():
        assert array is outputs[name]  # written in place, no copies
    check_outputs(case, got, inputs)


def test_registry_and_pipeline() -> None:
    target = get_all_targets()["c"]()
    assert target is CTarget and target.name == "c"
    assert not target.pipeline.startswith("convert-ein-to-affine")  # the loops are converted once, before


def test_source_is_plain_c() -> None:
    source, _ = to_c(MATMUL)
    assert "#include <math.h>" in source and "#include <stdint.h>" in source
    assert (
        "void kernel(const float* restrict A, const float* restrict B, float* restrict C)"
        in source
    )
    assert "for (int64_t K = 0; K < 3; K++) {" in source
    # minimal parentheses: `*` binds tighter than `+`
    assert "C[N * 5 + M] = C[N * 5 + M] + A[N * 3 + K] * B[K * 5 + M];" in source


def test_guarded_pad_reads_only_inside() -> None:
    """A's neighbours in memory are NaN: any read outside A would show up in the result."""
    kernel = build(PAD)
    backing = np.full(12, np.nan, np.float32)
    a = backing[4:8]
    a[:] = [1, 2, 3, 4]
    got = kernel.run({"A": a}, poisoned(kernel))
    np.testing.assert_array_equal(got["P"], [0, 1, 2, 3, 4, 0])


def test_second_build_is_a_cache_hit() -> None:
    source, signature = to_c(MATMUL)
    first = compile_c(source + "// cache test\n")
    second = compile_c(source + "// cache test\n")
    assert not first.cache_hit and second.cache_hit
    assert first.path == second.path and first.path.exists()
    assert first.source_path.read_text().endswith("// cache test\n")
    other_flags = compile_c(source + "// cache test\n", extra_flags=("-ffp-contract=off",))
    assert other_flags.path != first.path


def test_compiler_failure_reports_stderr_and_source() -> None:
    with pytest.raises(ToolchainError) as error:
        compile_c("void kernel(float* x) { this is not C; }\n")
    message = str(error.value)
    assert "error" in message and ".c" in message
    assert Path(message.split("kernel ")[1].split("\n")[0]).exists()


@pytest.fixture(scope="module")
def kernel() -> CKernel:
    return build(MATMUL)


class TestBadArrays:

    def good(self) -> dict[str, np.ndarray]:
        return {"A": np.ones((4, 3), np.float32), "B": np.ones((3, 5), np.float32)}

    def test_good_call(self, kernel: CKernel) -> None:
        got = kernel.run(self.good())
        np.testing.assert_array_equal(got["C"], np.full((4, 5), 3.0))

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            (lambda a: a.update(A=a["A"].astype(np.float64)), "'A' has dtype float64"),
            (lambda a: a.update(B=np.ones((5, 3), np.float32)), "'B' has shape"),
            (lambda a: a.update(B=np.ones((5, 3), np.float32).T), "not C-contiguous"),
            (lambda a: a.update(A=a["A"].tolist()), "must be a numpy.ndarray"),
            (lambda a: a.pop("B"), "missing input 'B'"),
            (lambda a: a.update(Z=a["A"]), "unknown input 'Z'"),
        ],
    )
    def test_bad_input(self, kernel: CKernel, change, message: str) -> None:  # type: ignore[no-untyped-def]
        inputs = self.good()
        change(inputs)
        with pytest.raises(RuntimeInputError, match=message):
            kernel.run(inputs)

    def test_bad_outputs(self, kernel: CKernel) -> None:
        inputs = self.good()
        readonly = np.zeros((4, 5), np.float32)
        readonly.flags.writeable = False
        with pytest.raises(RuntimeInputError, match="read-only"):
            kernel.run(inputs, {"C": readonly})
        with pytest.raises(RuntimeInputError, match="dtype int32"):
            kernel.run(inputs, {"C": np.zeros((4, 5), np.int32)})
        overlapping = np.zeros(40, np.float32)
        inputs["A"] = overlapping[:12].reshape(4, 3)
        with pytest.raises(RuntimeInputError, match="overlaps argument 'A'"):
            kernel.run(inputs, {"C": overlapping[10:30].reshape(4, 5)})

    def test_positional_call_checks_too(self, kernel: CKernel) -> None:
        a, b = self.good().values()
        c = np.empty((4, 5), np.float32)
        kernel(a, b, c)
        np.testing.assert_array_equal(c, np.full((4, 5), 3.0))
        with pytest.raises(RuntimeInputError, match="takes 3 arrays"):
            kernel(a, b)
        with pytest.raises(RuntimeInputError, match="'C' is not C-contiguous"):
            kernel(a, b, np.empty((5, 4), np.float32).T)


def test_unknown_op_is_an_internal_error_naming_it() -> None:
    module = lower(
        """
func.func @kernel(%X: tensor<4xi32> {ein.name = "X"}) -> tensor<4xi32> {
  %y = ein.einsum "Y" assign parallel [N = 4] : tensor<4xi32> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<4xi32>
    %c = math.ctlz %x : i32
    ein.yield %c : i32
  }
  func.return %y : tensor<4xi32>
}
"""
    )
    with pytest.raises(InternalCompilerError, match="cannot print 'math.ctlz'"):
        CTarget.emit(module)


def test_f16_math_must_be_legalized_first() -> None:
    module = lower(
        """
func.func @kernel(%X: tensor<4xf16> {ein.name = "X"}) -> tensor<4xf16> {
  %y = ein.einsum "Y" assign parallel [N = 4] : tensor<4xf16> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<4xf16>
    %e = math.exp %x : f16
    ein.yield %e : f16
  }
  func.return %y : tensor<4xf16>
}
"""
    )
    with pytest.raises(InternalCompilerError, match="legalize-f16-for-c"):
        CTarget.emit(module)


def test_reparsed_lowered_module_prints_the_same_c() -> None:
    """Affine maps parsed from text carry symbols; the printer reads them as dims."""
    for text in (MATMUL, PAD):
        lowered = lower(text, C_LOWERING)
        assert CTarget.emit(parse(str(lowered))) == CTarget.emit(lowered)


def test_concurrent_builds_of_one_source_agree() -> None:
    from concurrent.futures import ThreadPoolExecutor

    source, _ = to_c(MATMUL)
    source += "// concurrent\n"
    with ThreadPoolExecutor(4) as pool:
        libraries = list(pool.map(lambda _: compile_c(source), range(4)))
    assert len({lib.path for lib in libraries}) == 1
    assert libraries[0].path.exists()
    leftovers = [p for p in libraries[0].path.parent.iterdir() if p.name.startswith(".")]
    assert not leftovers


def test_vector_width_follows_the_host_or_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """C vectors are as wide as the host's registers (`cc -march=native`'s macros), or
    `$EINC_C_VECTOR_BITS`; the printed vector type follows."""
    monkeypatch.delenv("EINC_C_VECTOR_BITS", raising=False)
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    host = native_vector_bits()
    if "avx512f" in flags:
        assert host == 512
    elif "avx" in flags:
        assert host == 256
    assert host in (128, 256, 512)
    for bits in (128, 256, 512):
        monkeypatch.setenv("EINC_C_VECTOR_BITS", str(bits))
        assert native_vector_bits() == bits and CTarget.vector_lanes() == bits // 32
    monkeypatch.setenv("EINC_C_VECTOR_BITS", "300")
    with pytest.raises(ToolchainError, match="expected 128, 256 or 512"):
        native_vector_bits()
