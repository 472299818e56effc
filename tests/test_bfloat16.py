"""bfloat16 on every target, bit for bit against NumPy's bfloat16 (ml_dtypes): casts from and to
every float dtype and int32, arithmetic computed in float32 and rounded once, a constant folded
to bfloat16 (a tie), `exp`, a matmul
of bfloat16 inputs accumulating in float32, a max reduction, over the edge values (NaN, the
infinities, signed zeros, rounding ties, the largest finite value and what rounds past it,
subnormals). One compile per target (module-scoped); CUDA and HIP compile-checked.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.semantics.compare import max_error, tolerance
from einc.semantics.loops import run_interpreted
from einc.semantics.reference import run_reference, saturate
from tests.test_device_targets import require

BF16 = np.dtype(ml_dtypes.bfloat16)
TARGETS = ("c", "opencl", "sycl", "hlsl", "poplar")

F = [1.0, 1.00390625, 1.01171875, 1.0039063, -1.00390625, 3.3895314e38, 3.3961776e38, 3.4e38,
     -3.4e38, 1e-39, 9.2e-41, 4.6e-41, -0.0, 0.0, math.inf, -math.inf, math.nan, 2.5, -7.75, 0.3]  # fmt: skip
"""float32 values: exact, a tie to even (down, up), just above a tie, the largest finite
bfloat16, the tie above it (to infinity), beyond, subnormals (one a tie), signed zeros,
infinities, NaN."""
E = len(F)

PROGRAM = f"""
input x: bfloat16[{E}]
input y: bfloat16[{E}]
input h: float16[{E}]
input f: float32[{E}]
input d: float64[{E}]
input a: bfloat16[4, 8]
input b: bfloat16[8, 4]
output add, mul, ex, fromf, fromd, fromh, toh, tof, toi, mm, top, folded
add[N] = x[N] + y[N]
mul[N] = x[N] * y[N] - 0.5
ex[N] = x[N].call(`exp`)
fromf[N] = f[N].cast(`bfloat16`)
fromd[N] = d[N].cast(`bfloat16`)
fromh[N] = h[N].cast(`bfloat16`)
toh[N] = x[N].cast(`float16`)
tof[N] = x[N].cast(`float32`) + h[N]
toi[N] = x[N].cast(`int32`)
mm[I, J] +=! a[I, K].cast(`float32`) * b[K, J].cast(`float32`)
top[] >=! x[N]
folded[N] = y[N] + (const(1.0, `float32`) + const(0.01171875, `float32`)).cast(`bfloat16`)
"""


def program(target: str) -> str:
    """PROGRAM, without its float64 input where the target has no float64 (Poplar)."""
    if target != "poplar":
        return PROGRAM
    lines = [line for line in PROGRAM.splitlines() if not line.startswith(("input d:", "fromd["))]
    return "\n".join(lines).replace("fromf, fromd,", "fromf,")


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    f = np.array(F, np.float32)
    with np.errstate(over="ignore"):
        return {
            "x": f.astype(BF16), "y": np.roll(f, 3).astype(BF16),
            "h": rng.uniform(-4, 4, E).astype(np.float16),
            "f": f, "d": np.array(F, np.float64) * (1 + 2.0**-40),  # rounds through float32
            "a": rng.uniform(-2, 2, (4, 8)).astype(BF16),
            "b": rng.uniform(-2, 2, (8, 4)).astype(BF16),
        }  # fmt: skip


def expected(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, y = v["x"].astype(np.float32), v["y"].astype(np.float32)
    with np.errstate(all="ignore"):
        return {
            "add": (x + y).astype(BF16),
            "mul": (x * y).astype(BF16).astype(np.float32).__sub__(np.float32(0.5)).astype(BF16),
            "ex": np.exp(x).astype(BF16),
            "fromf": v["f"].astype(BF16), "fromd": v["d"].astype(np.float32).astype(BF16),
            "fromh": v["h"].astype(np.float32).astype(BF16),
            "toh": x.astype(np.float16), "tof": x + v["h"].astype(np.float32),
            "toi": saturate(x, np.dtype(np.int32)),
            "mm": v["a"].astype(np.float32) @ v["b"].astype(np.float32),
            "top": np.max(x).astype(BF16),
            "folded": (y + np.float32(np.float32(1.01171875).astype(BF16))).astype(BF16),  # a tie: 1.015625
        }  # fmt: skip


def check(name: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    failures = []
    for key, w in want.items():
        g = np.asarray(got[key])
        assert g.dtype == w.dtype, (key, g.dtype, w.dtype)
        if g.dtype.kind in "iu":
            same = g == w
        else:
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            same = ((g64 == w64) & (np.signbit(g64) == np.signbit(w64))) | (np.isnan(g64) & np.isnan(w64))
            if key == "ex":  # float32 exp of the target's library, then one rounding: 1 ulp
                with np.errstate(all="ignore"):
                    same |= np.abs(g64 - w64) <= 2.0**-7 * np.abs(w64)
            if key == "mm":  # float32 sums in another order
                same |= np.abs(g64 - w64) <= 1e-5 * np.max(np.abs(w64))
        if not np.all(same):
            bad = np.flatnonzero(~np.asarray(same).reshape(-1))
            failures.append(f"{key} at {bad.tolist()}: got {g.reshape(-1)[bad].tolist()}, "
                            f"want {w.reshape(-1)[bad].tolist()}")  # fmt: skip
    assert not failures, f"{name}:\n  " + "\n  ".join(failures)


def test_numpy_bfloat16_is_the_rule() -> None:
    """What the expectations rest on: ml_dtypes rounds float32 to nearest even, float64 through
    float32, and keeps NaN, infinities and signed zeros."""
    f = np.array([1.00390625, 1.01171875, 3.3961776e38, -0.0, 9.2e-41], np.float32)
    assert f.astype(BF16).view(np.uint16).tolist() == [0x3F80, 0x3F82, 0x7F80, 0x8000, 0x0001]
    assert np.array([1.0039062500001]).astype(BF16).astype(np.float64).tolist() == [1.0]


def test_interpreter_and_reference() -> None:
    values = inputs()
    comp = Compilation(PROGRAM, "<bfloat16>")
    want = expected(values)
    check("interpreter", run_interpreted(comp.run_until("loops"), values), want)
    reference = run_reference(comp.run_until("ein"), values)  # float64: within bfloat16's tolerance
    for key in ("add", "mm", "toh", "tof", "toi"):
        got, w = np.asarray(reference[key]), want[key].astype(np.float64)
        finite = np.isfinite(w)
        assert max_error(got.astype(w.dtype)[finite], w[finite]) <= tolerance("bfloat16"), key


@pytest.mark.parametrize(
    "target", [pytest.param(t, marks=[getattr(pytest.mark, t)] if t != "c" else []) for t in TARGETS]
)
def test_target(target: str) -> None:
    require(target)
    values = inputs()
    comp = Compilation(program(target), "<bfloat16>", target=target)
    kernel = comp.kernel()
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    kernel.run({k: v.copy() for k, v in values.items() if k in {t.name for t in comp.program.inputs}}, outputs)
    check(target, outputs, {k: v for k, v in expected(values).items() if k in outputs})


@pytest.mark.parametrize("target", [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("cuda", "hip")])
def test_compiles(target: str) -> None:
    """NVRTC / hipcc accept the bfloat16 helpers; where the GPU is present, the numbers too."""
    require(target)
    comp = Compilation(PROGRAM, "<bfloat16>", target=target)
    kernel = comp.kernel()
    assert "einc_f32_to_bf16" in kernel.source
    reports = kernel.check()
    assert reports and all(r.ok for r in reports)
    if kernel.available:
        values = inputs()
        outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
        kernel.run({k: v.copy() for k, v in values.items()}, outputs)
        check(target, outputs, expected(values))


def test_torch_op() -> None:
    """torch.bfloat16 tensors in and out of an einc.torch op (C), viewed without a copy."""
    torch = pytest.importorskip("torch")
    import einc.torch

    spec = {"dtype": "bfloat16", "shape": [8]}
    op = einc.torch.op("output0[N] = input0[N] * input1[N] + 1.0", {"input0": spec, "input1": spec}, name="bf16_fma")
    a, b = torch.randn(8).to(torch.bfloat16), torch.randn(8).to(torch.bfloat16)
    got = op(a, b)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, ((a.float() * b.float()).to(torch.bfloat16).float() + 1).to(torch.bfloat16))
