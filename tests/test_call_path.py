"""The kernel call path (einc.compiler.kernel): DLPack inputs of any array library, outputs in
the caller's type or written into `out=`, the checks (dtype, shape, device, contiguity,
overlap), debug-mode poisoning, the C trampoline, device-array marshalling, and kernels of
targets whose runtime is missing here (CUDA, HIP: source, manifest and compile check work,
only a call raises a ToolchainError).

No GPU here: the CUDA launch itself is not run; what reaches it (device pointers from
`__cuda_array_interface__` and DLPack capsules, the staged buffers) is checked with a
recording runner. The torch cases need torch (the [torch] extra) and are skipped without it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping

import numpy as np
import pytest

import einc
from einc.compiler.driver import Compilation
from einc.errors import RuntimeInputError, RuntimeMissingError, TargetError, ToolchainError
from einc.runtime.arrays import CUDA, DeviceArray, dlpack_view, host_array
from einc.runtime.c import load_c_kernel
from einc.runtime.device import stage
from einc.compiler.kernel import Kernel
from einc.runtime.signature import KernelSignature
from tests.oracle.seeds import fresh_seed

ADD = "output0[N, M] = input0[N, M] + input1[N, M] * 2"
TWO = "output0[N] = input0[N] + input1[N]; output1[N] = input0[N] * input1[N]"


def inputs(shape: list[int], dtype: object = "float32") -> dict[str, dict[str, object]]:
    return {"input0": {"dtype": dtype, "shape": shape}, "input1": {"dtype": dtype, "shape": shape}}


def rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)


@pytest.fixture(scope="module")
def add() -> Kernel:
    return einc.compile(ADD, inputs([6, 5]), debug=False)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(fresh_seed())


class Foreign:
    """Another library's array: only `__dlpack__` / `__dlpack_device__`, its type in module
    `fakearray`, whose `from_dlpack` makes outputs of this type."""

    __module__ = "fakearray"

    def __init__(self, data: np.ndarray, device: tuple[int, int] = (1, 0)):
        self.data = data
        self.device = device

    def __dlpack__(self, **kwargs: object) -> object:
        return self.data.__dlpack__(**kwargs)  # type: ignore[arg-type]  # NumPy's keywords, passed on

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


@pytest.fixture
def fakearray(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("fakearray")
    module.from_dlpack = lambda x: Foreign(np.from_dlpack(x))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fakearray", module)
    return module


# --- NumPy, the fast path -------------------------------------------------------------------


def test_numpy_call_matches_the_reference_through_the_trampoline(add: Kernel, rng: np.random.Generator) -> None:
    assert getattr(add._fast, "__module__", None) == "_einc_fastcall", "the C trampoline was not built"
    a, b = rand(rng, (6, 5)), rand(rng, (6, 5))
    out = add(input0=a, input1=b)
    assert list(out) == ["output0"] and type(out["output0"]) is np.ndarray
    np.testing.assert_allclose(out["output0"], a.astype(np.float64) + 2.0 * b, rtol=1e-6)
    again = add(input0=b, input1=a)["output0"]
    assert again is not out["output0"]
    np.testing.assert_allclose(again, b.astype(np.float64) + 2.0 * a, rtol=1e-6)


def test_out_arrays_are_written_and_returned(add: Kernel, rng: np.random.Generator) -> None:
    a, b = rand(rng, (6, 5)), rand(rng, (6, 5))
    want = a.astype(np.float64) + 2.0 * b
    for form in ("dict", "array"):
        c = np.full((6, 5), 7.0, np.float32)
        result = add(input0=a, input1=b, out={"output0": c} if form == "dict" else c)
        assert result["output0"] is c, form
        np.testing.assert_allclose(c, want, rtol=1e-6)
    c = np.zeros((6, 5), np.float32)
    add.run({"input0": a, "input1": b}, {"output0": c})
    np.testing.assert_allclose(c, want, rtol=1e-6)


def test_two_outputs_with_out_dict_and_partial_out(rng: np.random.Generator) -> None:
    kernel = einc.compile(TWO, inputs([16]), extra_outputs=["output0"], debug=False)
    a, b = rand(rng, (16,)), rand(rng, (16,))
    o0, o1 = np.empty(16, np.float32), np.empty(16, np.float32)
    result = kernel(input0=a, input1=b, out={"output0": o0, "output1": o1})
    assert result["output0"] is o0 and result["output1"] is o1
    np.testing.assert_allclose(o0, a + b, rtol=1e-6)
    np.testing.assert_allclose(o1, a * b, rtol=1e-6)
    partial = kernel(input0=a, input1=b, out={"output1": o1})  # output0 allocated
    assert partial["output1"] is o1
    np.testing.assert_allclose(partial["output0"], a + b, rtol=1e-6)
    with pytest.raises(RuntimeInputError, match="out= is one array, but the kernel produces 2 outputs"):
        kernel(input0=a, input1=b, out=o0)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.astype(np.float64), "input 'input0' has dtype float64, expected float32"),
        (lambda a: a[:5], r"input 'input0' has shape \[5, 5\], expected \[6, 5\]"),
        (lambda a: np.asfortranarray(a), "input 'input0' is not C-contiguous"),
        (lambda a: a.tolist(), "input 'input0' must be an array"),
        (lambda a: Foreign(a, (CUDA, 0)), "input 'input0' is on cuda:0, but the c kernel runs on the host"),
    ],
)
def test_bad_inputs_are_runtime_input_errors(add: Kernel, rng: np.random.Generator, change, message: str) -> None:  # type: ignore[no-untyped-def]
    a, b = rand(rng, (6, 5)), rand(rng, (6, 5))
    with pytest.raises(RuntimeInputError, match=message):
        add(input0=change(a), input1=b)


def test_bad_out_arrays(add: Kernel, rng: np.random.Generator) -> None:
    a, b = rand(rng, (6, 5)), rand(rng, (6, 5))
    with pytest.raises(RuntimeInputError, match="output 'output0' overlaps input 'input0'"):
        add(input0=a, input1=b, out=a)
    with pytest.raises(RuntimeInputError, match="output 'output0' has dtype int32"):
        add(input0=a, input1=b, out=np.empty((6, 5), np.int32))
    frozen = np.empty((6, 5), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(RuntimeInputError, match="output 'output0' is read-only"):
        add(input0=a, input1=b, out=frozen)
    with pytest.raises(RuntimeInputError, match="unknown output 'output9'"):
        add(input0=a, input1=b, out={"output9": np.empty((6, 5), np.float32)})
    with pytest.raises(RuntimeInputError, match="unknown input 'input7'"):
        add(input0=a, input1=b, input7=a)
    with pytest.raises(RuntimeInputError, match="missing input 'input1'"):
        add(input0=a)


def test_non_contiguous_inputs_are_copied_only_when_allowed(rng: np.random.Generator) -> None:
    a, b = rand(rng, (5, 6)).T, rand(rng, (6, 5))
    want = a.astype(np.float64) + 2.0 * b
    strict = einc.compile(ADD, inputs([6, 5]), debug=False)
    with pytest.raises(RuntimeInputError, match="allow_copy=True"):
        strict(input0=a, input1=b)
    allowing = einc.compile(ADD, inputs([6, 5]), allow_copy=True, debug=False)
    np.testing.assert_allclose(allowing(input0=a, input1=b)["output0"], want, rtol=1e-6)
    target = np.zeros((5, 6), np.float32).T  # a non-contiguous out= array: written through a copy
    allowing(input0=a, input1=b, out=target)
    np.testing.assert_allclose(target, want, rtol=1e-6)
    strict.allow_copy = True
    np.testing.assert_allclose(strict(input0=a, input1=b)["output0"], want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.dtype("float32"), "float32"])
def test_numpy_dtypes_in_input_dict(dtype: object) -> None:
    kernel = einc.compile(ADD, inputs([6, 5], dtype))
    assert [t.dtype for t in kernel.inputs] == ["float32", "float32"]


def test_unknown_dtype_object_is_refused_with_a_location() -> None:
    with pytest.raises(einc.EincError, match="unknown dtype"):
        einc.compile(ADD, inputs([6, 5], float))


# --- DLPack from other libraries -------------------------------------------------------------


def test_dlpack_inputs_are_zero_copy_and_outputs_come_back_in_their_type(
    add: Kernel, rng: np.random.Generator, fakearray: types.ModuleType
) -> None:
    a, b = rand(rng, (6, 5)), rand(rng, (6, 5))
    assert np.shares_memory(host_array("input", "input0", Foreign(a)), a)
    out = add(input0=Foreign(a), input1=b)
    assert type(out["output0"]) is Foreign
    np.testing.assert_allclose(out["output0"].data, a.astype(np.float64) + 2.0 * b, rtol=1e-6)
    c = np.empty((6, 5), np.float32)
    given = Foreign(c)
    assert add(input0=Foreign(a), input1=Foreign(b), out=given)["output0"] is given  # the caller's object
    np.testing.assert_allclose(c, a.astype(np.float64) + 2.0 * b, rtol=1e-6)


def test_dlpack_capsule_is_read_without_the_library(rng: np.random.Generator) -> None:
    a = rand(rng, (3, 4))
    view = dlpack_view("input", "x", a[1:])
    assert view.ptr == a[1:].ctypes.data and view.shape == (2, 4) and view.dtype == np.float32
    assert view.c_contiguous and view.device == (1, 0)
    strided = dlpack_view("input", "x", a[:, ::2])
    assert strided.strides == (4, 2) and not strided.c_contiguous


# --- debug mode: unwritten outputs are caught --------------------------------------------------


def lazy_kernel(debug: bool | None) -> Kernel:
    """A real C kernel for ADD's signature that writes nothing."""
    comp = Compilation(ADD, "<lazy>", inputs([6, 5]))
    signature = KernelSignature.from_module(comp.module("target"))
    lazy = load_c_kernel(f"void {signature.name}(float *a, float *b, float *c) {{ }}\n", signature)
    return Kernel(comp.source_text(), comp.program, lazy.run, "c", debug=debug)


def test_debug_mode_poisons_outputs_so_unwritten_ones_are_caught(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = rand(rng, (6, 5)), rand(rng, (6, 5))
    out = lazy_kernel(debug=True)(input0=a, input1=b)["output0"]
    assert np.isnan(out).all()
    correct = (a + 2 * b).astype(np.float32)
    reused = correct.copy()  # out= arrays holding the right numbers already are poisoned too
    lazy_kernel(debug=True)(input0=a, input1=b, out=reused)
    assert np.isnan(reused).all()
    untouched = correct.copy()
    lazy_kernel(debug=False)(input0=a, input1=b, out=untouched)  # no poisoning: stale data stays
    np.testing.assert_array_equal(untouched, correct)
    monkeypatch.setenv("EINC_DEBUG", "1")
    assert lazy_kernel(debug=None).debug and einc.compile(ADD, inputs([6, 5])).debug
    monkeypatch.setenv("EINC_DEBUG", "0")
    assert not einc.compile(ADD, inputs([6, 5])).debug


def test_the_test_suite_runs_in_debug_mode() -> None:
    assert einc.compile(ADD, inputs([6, 5])).debug, "tests/conftest.py sets EINC_DEBUG=1"


# --- targets without their runtime here ---------------------------------------------------------


@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_source_manifest_and_check_without_a_driver(target: str) -> None:
    kernel = einc.compile(ADD, inputs([64, 33]), target=target)
    assert 'extern "C" __global__' in kernel.source
    manifest = kernel.manifest
    assert manifest is not None and manifest.target == target
    launch = manifest.kernels[0]
    assert launch.name in kernel.source and launch.args == ("input0", "input1", "output0")
    assert all(g >= 1 for g in (*launch.grid, *launch.block))
    assert [b.role for b in manifest.buffers if b.name.startswith(("input", "output"))] == ["input", "input", "output"]
    reports = kernel.check()
    assert reports and all(r.ok and r.kernel(launch.name) for r in reports)
    if kernel.available:  # a machine with the GPU and driver: nothing to refuse
        pytest.skip(f"{target} runs here")
    with pytest.raises(ToolchainError) as caught:
        kernel(input0=np.ones((64, 33), np.float32), input1=np.ones((64, 33), np.float32))
    assert isinstance(caught.value, RuntimeMissingError)
    assert ("no NVIDIA" in caught.value.message) if target == "cuda" else ("no AMD GPU executor" in caught.value.message)
    assert kernel.unavailable is not None and kernel.unavailable in caught.value.message


def test_check_on_a_target_without_compile_check_says_so(add: Kernel) -> None:
    with pytest.raises(TargetError, match="has no compile check"):
        add.check()


# --- device arrays reach device runtimes as pointers ----------------------------------------------


class CudaLike:
    """A device array as CuPy and torch present one: `__cuda_array_interface__`."""

    def __init__(self, pointer: int, shape: tuple[int, ...], typestr: str = "<f4"):
        self.__cuda_array_interface__ = {"data": (pointer, False), "shape": shape, "typestr": typestr,
                                         "strides": None, "version": 3}  # fmt: skip

    def __dlpack_device__(self) -> tuple[int, int]:
        return (CUDA, 0)


class Recording:
    """A device runner that records what it is given."""

    device_types = frozenset({CUDA})

    def __init__(self) -> None:
        self.calls: list[tuple[Mapping[str, object], Mapping[str, object]]] = []

    def __call__(self, inputs: Mapping[str, object], outputs: Mapping[str, object]) -> None:
        self.calls.append((dict(inputs), dict(outputs)))


def test_device_arrays_reach_the_runner_as_pointers(add: Kernel) -> None:
    runner = Recording()
    kernel = Kernel(add.source, add.program, runner, "cuda", debug=False)
    a, b, c = CudaLike(0x1000, (6, 5)), CudaLike(0x2000, (6, 5)), CudaLike(0x3000, (6, 5))
    assert kernel(input0=a, input1=b, out=c)["output0"] is c
    (ins, outs), = runner.calls
    assert {k: (v.ptr, v.shape) for k, v in ins.items() if isinstance(v, DeviceArray)} == {
        "input0": (0x1000, (6, 5)), "input1": (0x2000, (6, 5))}  # fmt: skip
    assert isinstance(outs["output0"], DeviceArray) and outs["output0"].ptr == 0x3000
    with pytest.raises(RuntimeInputError, match="input 'input0' has dtype float64"):
        kernel(input0=CudaLike(0x1000, (6, 5), "<f8"), input1=b, out=c)
    with pytest.raises(RuntimeInputError, match="output 'output0' overlaps input 'input1'"):
        kernel(input0=a, input1=b, out=CudaLike(0x2000 + 60, (6, 5)))
    with pytest.raises(RuntimeInputError, match="pass the output arrays with out="):
        kernel(input0=a, input1=b)
    host = np.ones((6, 5), np.float32)
    kernel(input0=host, input1=b, out=c)  # host and device arrays mixed: the runner copies the host ones
    assert runner.calls[-1][0]["input0"] is host


def test_stage_passes_device_arrays_and_checks_their_storage_dtype() -> None:
    from einc.runtime.manifest import Buffer, KernelLaunch, LaunchManifest

    manifest = LaunchManifest("cuda", (Buffer("a", "float32", (4,), "input"), Buffer("h", "float16", (4,), "input", "float32"),
                                       Buffer("c", "float32", (4,), "output")),
                              (KernelLaunch("k", ("a", "h", "c"), (1, 1, 1), (4, 1, 1)),))  # fmt: skip
    a = DeviceArray(0x100, np.dtype("float32"), (4,), None, (CUDA, 0), None)
    c = DeviceArray(0x200, np.dtype("float32"), (4,), None, (CUDA, 0), None)
    staged = stage(manifest, {"a": a, "h": np.ones(4, np.float16)}, {"c": c})
    assert staged.device == {"a": a, "c": c} and staged.host["h"].dtype == np.float32
    h = DeviceArray(0x300, np.dtype("float16"), (4,), None, (CUDA, 0), None)
    with pytest.raises(RuntimeInputError, match=r"stores float16 as float32: pass a host array"):
        stage(manifest, {"a": a, "h": h}, {"c": c})


# --- OpenCL keeps its buffers -----------------------------------------------------------------------


def test_opencl_reuses_its_buffers_between_calls(rng: np.random.Generator) -> None:
    from einc.targets import toolchains

    ok, why = toolchains.available("opencl")
    if not ok:
        if toolchains.required("opencl"):
            pytest.fail(why)
        pytest.skip(why)
    kernel = einc.compile(ADD, inputs([6, 5]), target="opencl")
    runner = kernel._runner
    for _ in range(2):
        a, b = rand(rng, (6, 5)), rand(rng, (6, 5))
        np.testing.assert_allclose(kernel(input0=a, input1=b)["output0"], a.astype(np.float64) + 2.0 * b, rtol=1e-6)
        buffers = getattr(runner, "_device_buffers")
        assert buffers is not None
        if _ == 0:
            first = dict(buffers)
    assert all(buffers[k] is first[k] for k in first)


# --- torch (the [torch] extra) ----------------------------------------------------------------------


def test_torch_tensors_in_torch_tensors_out(add: Kernel, rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")
    a, b = torch.from_numpy(rand(rng, (6, 5))), torch.from_numpy(rand(rng, (6, 5)))
    out = add(input0=a, input1=b)["output0"]
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    torch.testing.assert_close(out, a + 2 * b)
    c = torch.empty(6, 5)
    assert add(input0=a, input1=b, out=c)["output0"] is c
    torch.testing.assert_close(c, a + 2 * b)
    with pytest.raises(RuntimeInputError, match="not C-contiguous"):
        add(input0=torch.from_numpy(rand(rng, (5, 6))).t(), input1=b)
    with pytest.raises(RuntimeInputError, match="dtype float64"):
        add(input0=a.double(), input1=b)
    with pytest.raises(RuntimeInputError, match="detach"):
        add(input0=a.requires_grad_(), input1=b)
    kernel = einc.compile(ADD, inputs([6, 5], torch.float32))
    assert [t.dtype for t in kernel.inputs] == ["float32", "float32"]


# --- the trampoline against the ctypes path -----------------------------------------------------

PROGRAMS = [
    ("output0[] = input0[] + input1[]", {"input0": {"dtype": "float32", "shape": []}, "input1": {"dtype": "float32", "shape": []}}, None),
    ("output0[N, M] = input0[N, M] * input1[N, M] + 3", inputs([7, 9], "int32"), None),
    ("output0[N] +=! input0[N, K] * input1[N, K]", inputs([5, 13], "float64"), None),
    (TWO, inputs([33]), ["output0", "output1"]),
    ("output0[N] = input0[N] > input1[N]", inputs([10], "int64"), None),
    ("output0[N] = N.cast(`float32`).call(`tanh`) where N in 64", {}, None),
]


def with_ctypes_call(kernel: Kernel) -> Kernel:
    """`kernel` called through ctypes_call (the fallback where the trampoline cannot be built)."""
    from einc.runtime.c import CKernel, CtypesSpec, ctypes_call

    owner = getattr(kernel._runner, "__self__")
    assert isinstance(owner, CKernel)
    kernel._fast = ctypes_call
    kernel._spec = CtypesSpec(owner._function, [(b.name, b.dtype, b.shape, b.is_output) for b in owner.signature.buffers])
    return kernel


@pytest.mark.parametrize("way", ["trampoline", "ctypes_call"])
@pytest.mark.parametrize("ir, spec, extra", PROGRAMS)
def test_fast_calls_agree_with_the_python_path(ir: str, spec: dict, extra: list[str] | None, way: str) -> None:
    """The test suite runs in debug mode, which takes the Python path (CKernel.run): here each
    program runs both ways on the same inputs (ranks 0-2, ints, float64, bool results, no
    inputs), through the trampoline and through its ctypes fallback."""
    fast = einc.compile(ir, spec, extra_outputs=extra, debug=False)
    if way == "ctypes_call":
        fast = with_ctypes_call(fast)
    checked = einc.compile(ir, spec, extra_outputs=extra, debug=True)
    rng = np.random.default_rng(fresh_seed())
    arrays = {t.name: np.asarray(rng.integers(1, 8, t.shape) if "int" in t.dtype else rng.uniform(0.5, 2, t.shape), t.dtype)
              for t in fast.inputs}  # fmt: skip
    got, want = fast(**arrays), checked(**arrays)
    assert list(got) == list(want) == [t.name for t in fast.outputs]
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        np.testing.assert_array_equal(got[name], want[name])
    out = {name: np.empty_like(v) for name, v in want.items()}
    assert fast._fast is not None and fast._fast(fast._spec, arrays, out) is not None  # the fast call took it
    for name in want:
        np.testing.assert_array_equal(out[name], want[name])
    if arrays and want:  # an out= array overlapping an input: the fast call declines, the Python path refuses
        name, first = next(iter(want)), next(iter(arrays.values()))
        if first.dtype == want[name].dtype and first.shape == want[name].shape:
            assert fast._fast(fast._spec, arrays, {**out, name: first}) is None
            with pytest.raises(RuntimeInputError, match="overlaps"):
                fast(**arrays, out={**out, name: first})


def test_torch_fast_path_and_out_tensors(add: Kernel, rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")
    a, b = torch.from_numpy(rand(rng, (6, 5))), torch.from_numpy(rand(rng, (6, 5)))
    assert add._torch_fast({"input0": a, "input1": b}, None) is not None  # CPU tensors skip the Python path
    out = add(input0=a, input1=b)["output0"]
    assert type(out) is torch.Tensor
    torch.testing.assert_close(out, a + 2 * b)
    c, d = torch.empty(6, 5), torch.empty(6, 5)
    assert add(input0=a, input1=b, out=c)["output0"] is c
    assert add(input0=a, input1=b, out={"output0": d})["output0"] is d
    torch.testing.assert_close(c, a + 2 * b)
    torch.testing.assert_close(d, a + 2 * b)
    with pytest.raises(RuntimeInputError, match="output 'output0' overlaps input 'input0'"):
        add(input0=a, input1=b, out=a)


def test_device_array_that_cannot_be_exported_is_a_runtime_input_error(add: Kernel) -> None:
    class NeedsGrad(CudaLike):
        @property  # type: ignore[override]
        def __cuda_array_interface__(self) -> dict:
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad.")

        @__cuda_array_interface__.setter
        def __cuda_array_interface__(self, value: dict) -> None:
            pass

    kernel = Kernel(add.source, add.program, Recording(), "cuda", debug=False)
    with pytest.raises(RuntimeInputError, match=r"input 'input0' .* requires grad.*\(call \.detach\(\) first\)"):
        kernel(input0=NeedsGrad(0x1000, (6, 5)), input1=CudaLike(0x2000, (6, 5)), out=CudaLike(0x3000, (6, 5)))


def test_an_input_named_out_is_an_input(rng: np.random.Generator) -> None:
    kernel = einc.compile("output0[N] = out[N] * 2 + self[N]", {"out": {"dtype": "float32", "shape": [8]},
                                                               "self": {"dtype": "float32", "shape": [8]}})  # fmt: skip
    x, y = rand(rng, (8,)), rand(rng, (8,))
    np.testing.assert_allclose(kernel(out=x, self=y)["output0"], x * 2 + y, rtol=1e-6)
    result = np.empty(8, np.float32)
    kernel.run({"out": x, "self": y}, {"output0": result})
    np.testing.assert_allclose(result, x * 2 + y, rtol=1e-6)
    with pytest.raises(RuntimeInputError, match="missing input 'out'"):
        kernel(self=y)
