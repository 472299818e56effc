"""convert-ein-to-affine and the interpreter: hand-written ein programs against NumPy.

The cases (`CASES`) are shared with tests/test_c_target.py: each is an ein-level module,
its inputs (random, non-zero) and a float64 NumPy reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from xdsl.dialects import affine, bufferization, func, memref, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.parser import Parser
from xdsl.utils.exceptions import InterpretationError

from einc.dialects.context import make_context
from einc.dialects import ein
from einc.errors import RuntimeInputError
from einc.semantics.loops import make_interpreter, run_interpreted
from einc.compiler.registry import run_pipeline
from einc.runtime.signature import KernelSignature

Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class Case:
    name: str
    ir: str
    inputs: Callable[[np.random.Generator], Arrays]
    reference: Callable[[Arrays], Arrays]
    """float64 (or exact integer) values of the outputs, by name."""
    rtol: dict[str, float] = field(default_factory=dict)
    """Relative tolerance per output (default by dtype)."""


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def lower(text: str, pipeline: str = "convert-ein-to-affine") -> ModuleOp:
    module = parse(text)
    run_pipeline(make_context(), module, pipeline)
    module.verify()
    return module


def nonzero(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Floats in ±[0.5, 2), ints in ±[1, 5]."""
    sign = rng.choice([-1, 1], shape)
    if np.dtype(dtype).kind == "f":
        return (rng.uniform(0.5, 2.0, shape) * sign).astype(dtype)
    return (rng.integers(1, 6, shape) * sign).astype(dtype)


DEFAULT_RTOL = {"float64": 1e-12, "float32": 2e-6, "float16": 2e-3}


def check_outputs(case: Case, got: Arrays, inputs: Arrays) -> None:
    want = case.reference(inputs)
    assert set(got) == set(want)
    for name, expected in want.items():
        actual = got[name]
        assert actual.shape == expected.shape, name
        if actual.dtype.kind == "f":
            rtol = case.rtol.get(name, DEFAULT_RTOL[str(actual.dtype)])
            np.testing.assert_allclose(
                actual.astype(np.float64), expected, rtol=rtol, atol=rtol, err_msg=name
            )
        else:
            np.testing.assert_array_equal(actual, expected.astype(actual.dtype), err_msg=name)


def reduction(op: str, dtype: str) -> str:
    return f"""
func.func @kernel(%X: tensor<3x4x{dtype}> {{ein.name = "X"}}) -> tensor<3x{dtype}> {{
  %r = ein.einsum "R" {op} parallel [N = 3] reduce [C = 4] : tensor<3x{dtype}> {{
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x4x{dtype}>
    ein.yield %x : {dtype}
  }}
  func.return %r : tensor<3x{dtype}>
}}
"""


MATMUL = """
func.func @kernel(%A: tensor<4x3xf32> {ein.name = "A"}, %B: tensor<3x5xf32> {ein.name = "B"})
    -> tensor<4x5xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 5] reduce [K = 3] : tensor<4x5xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x3xf32>
    %b = ein.load %B[%K, %M] : tensor<3x5xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<4x5xf32>
}
"""

# out[N] = A[N - 1].when([N >= 1, N - 1 < 4], 0.0) where N in 6
PAD = """
func.func @kernel(%A: tensor<4xf32> {ein.name = "A"}) -> tensor<6xf32> {
  %r = ein.einsum "P" assign parallel [N = 6] : tensor<6xf32> {
  ^bb0(%N : index):
    %c1 = arith.constant 1 : index
    %c5 = arith.constant 5 : index
    %lo = arith.cmpi sge, %N, %c1 : index
    %hi = arith.cmpi slt, %N, %c5 : index
    %ok = arith.andi %lo, %hi : i1
    %v = scf.if %ok -> (f32) {
      %i = affine.apply affine_map<(d0) -> (d0 - 1)>(%N)
      %x = ein.load %A[%i] : tensor<4xf32>
      scf.yield %x : f32
    } else {
      %z = arith.constant 0.0 : f32
      scf.yield %z : f32
    }
    ein.yield %v : f32
  }
  func.return %r : tensor<6xf32>
}
"""

UNGUARDED_PAD = """
func.func @kernel(%A: tensor<4xf32> {ein.name = "A"}) -> tensor<6xf32> {
  %r = ein.einsum "P" assign parallel [N = 6] : tensor<6xf32> {
  ^bb0(%N : index):
    %i = affine.apply affine_map<(d0) -> (d0 - 1)>(%N)
    %x = ein.load %A[%i] : tensor<4xf32>
    ein.yield %x : f32
  }
  func.return %r : tensor<6xf32>
}
"""

# out[F, C] = T[I[F], C]
GATHER = """
func.func @kernel(%T: tensor<5x3xf64> {ein.name = "T"}, %I: tensor<4xi32> {ein.name = "I"})
    -> tensor<4x3xf64> {
  %r = ein.einsum "G" assign parallel [F = 4, C = 3] : tensor<4x3xf64> {
  ^bb0(%F : index, %C : index):
    %i = ein.load %I[%F] : tensor<4xi32>
    %j = arith.index_cast %i : i32 to index
    %x = ein.load %T[%j, %C] : tensor<5x3xf64>
    ein.yield %x : f64
  }
  func.return %r : tensor<4x3xf64>
}
"""

# out[F] = T[I[F] // 2 + 5], I in [-10, -1]: a floor division of negative gathered indices
GATHER_FLOORDIV = """
func.func @kernel(%T: tensor<5xf32> {ein.name = "T"}, %I: tensor<6xi64> {ein.name = "I"})
    -> tensor<6xf32> {
  %r = ein.einsum "G" assign parallel [F = 6] : tensor<6xf32> {
  ^bb0(%F : index):
    %i = ein.load %I[%F] : tensor<6xi64>
    %j = arith.index_cast %i : i64 to index
    %c2 = arith.constant 2 : index
    %c5 = arith.constant 5 : index
    %q = arith.floordivsi %j, %c2 : index
    %k = arith.addi %q, %c5 : index
    %x = ein.load %T[%k] : tensor<5xf32>
    ein.yield %x : f32
  }
  func.return %r : tensor<6xf32>
}
"""

# S[N] +=! X[N, C]; Y[N, C] = X[N, C] / S[N]; both returned; plus an intermediate M
MULTI = """
func.func @kernel(%X: tensor<3x4xf32> {ein.name = "X"}) -> (tensor<3x4xf32>, tensor<3xf32>) {
  %m = ein.einsum "M" max parallel [N = 3] reduce [C = 4] : tensor<3xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x4xf32>
    ein.yield %x : f32
  }
  %s = ein.einsum "S" add parallel [N = 3] reduce [C = 4] : tensor<3xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x4xf32>
    %mx = ein.load %m[%N] : tensor<3xf32>
    %d = arith.subf %x, %mx : f32
    %e = math.exp %d : f32
    ein.yield %e : f32
  }
  %y = ein.einsum "Y" assign parallel [N = 3, C = 4] : tensor<3x4xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x4xf32>
    %mx = ein.load %m[%N] : tensor<3xf32>
    %d = arith.subf %x, %mx : f32
    %e = math.exp %d : f32
    %t = ein.load %s[%N] : tensor<3xf32>
    %q = arith.divf %e, %t : f32
    ein.yield %q : f32
  }
  func.return %y, %s : tensor<3x4xf32>, tensor<3xf32>
}
"""

# T[] +=! X[N] * s[]; U[N] = X[N] * T[]
RANK0 = """
func.func @kernel(%X: tensor<5xf64> {ein.name = "X"}, %s: tensor<f64> {ein.name = "s"})
    -> (tensor<f64>, tensor<5xf64>) {
  %t = ein.einsum "T" add parallel [] reduce [N = 5] : tensor<f64> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<5xf64>
    %k = ein.load %s[] : tensor<f64>
    %p = arith.mulf %x, %k : f64
    ein.yield %p : f64
  }
  %u = ein.einsum "U" assign parallel [N = 5] : tensor<5xf64> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<5xf64>
    %k = ein.load %t[] : tensor<f64>
    %p = arith.mulf %x, %k : f64
    ein.yield %p : f64
  }
  func.return %t, %u : tensor<f64>, tensor<5xf64>
}
"""

# Y[N] = exp(X[N]) * X[N] + 1 (f16); Z[] +=! X[N] (f16 reduction)
F16 = """
func.func @kernel(%X: tensor<8xf16> {ein.name = "X"}) -> (tensor<8xf16>, tensor<f16>) {
  %y = ein.einsum "Y" assign parallel [N = 8] : tensor<8xf16> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<8xf16>
    %e = math.exp %x : f16
    %p = arith.mulf %e, %x : f16
    %one = arith.constant 1.0 : f16
    %r = arith.addf %p, %one : f16
    ein.yield %r : f16
  }
  %z = ein.einsum "Z" add parallel [] reduce [N = 8] : tensor<f16> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<8xf16>
    ein.yield %x : f16
  }
  func.return %y, %z : tensor<8xf16>, tensor<f16>
}
"""

# Y[N] = X[N] * W[N] + 100 (i8, wraps); Z[N] = (X[N] + W[N]) > 3 as i8 (compares the wrapped sum)
I8 = """
func.func @kernel(%X: tensor<6xi8> {ein.name = "X"}, %W: tensor<6xi8> {ein.name = "W"})
    -> (tensor<6xi8>, tensor<6xi8>) {
  %y = ein.einsum "Y" assign parallel [N = 6] : tensor<6xi8> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<6xi8>
    %w = ein.load %W[%N] : tensor<6xi8>
    %p = arith.muli %x, %w : i8
    %c = arith.constant 100 : i8
    %r = arith.addi %p, %c : i8
    ein.yield %r : i8
  }
  %z = ein.einsum "Z" assign parallel [N = 6] : tensor<6xi8> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<6xi8>
    %w = ein.load %W[%N] : tensor<6xi8>
    %s = arith.addi %x, %w : i8
    %c = arith.constant 3 : i8
    %b = arith.cmpi sgt, %s, %c : i8
    %r = arith.extui %b : i1 to i8
    ein.yield %r : i8
  }
  func.return %y, %z : tensor<6xi8>, tensor<6xi8>
}
"""

# Y = floordiv(X, D) + 3 * remsi(X, D) - (X >> 1) + max(X, D) - min(X, 0)  (i32)
INT_OPS = """
func.func @kernel(%X: tensor<7xi32> {ein.name = "X"}, %D: tensor<7xi32> {ein.name = "D"})
    -> tensor<7xi32> {
  %y = ein.einsum "Y" assign parallel [N = 7] : tensor<7xi32> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<7xi32>
    %d = ein.load %D[%N] : tensor<7xi32>
    %q = arith.floordivsi %x, %d : i32
    %r = arith.remsi %x, %d : i32
    %c3 = arith.constant 3 : i32
    %r3 = arith.muli %r, %c3 : i32
    %c1 = arith.constant 1 : i32
    %h = arith.shrsi %x, %c1 : i32
    %mx = arith.maxsi %x, %d : i32
    %c0 = arith.constant 0 : i32
    %mn = arith.minsi %x, %c0 : i32
    %a = arith.addi %q, %r3 : i32
    %b = arith.subi %a, %h : i32
    %c = arith.addi %b, %mx : i32
    %e = arith.subi %c, %mn : i32
    ein.yield %e : i32
  }
  func.return %y : tensor<7xi32>
}
"""

# reshape through floordiv/mod: Y[N] = X[N floordiv 2, N mod 2]; Z[N] = X[(N + 5) floordiv 2 - 2, 1]
AFFINE_DIVMOD = """
func.func @kernel(%X: tensor<3x2xf32> {ein.name = "X"}) -> (tensor<6xf32>, tensor<3xf32>) {
  %y = ein.einsum "Y" assign parallel [N = 6] : tensor<6xf32> {
  ^bb0(%N : index):
    %i = affine.apply affine_map<(d0) -> (d0 floordiv 2)>(%N)
    %j = affine.apply affine_map<(d0) -> (d0 mod 2)>(%N)
    %x = ein.load %X[%i, %j] : tensor<3x2xf32>
    ein.yield %x : f32
  }
  %z = ein.einsum "Z" assign parallel [N = 3] : tensor<3xf32> {
  ^bb0(%N : index):
    %c1 = arith.constant 1 : index
    %i = affine.apply affine_map<(d0) -> ((d0 * 2 - 1) floordiv 2 + 1)>(%N)
    %x = ein.load %X[%i, %c1] : tensor<3x2xf32>
    ein.yield %x : f32
  }
  func.return %y, %z : tensor<6xf32>, tensor<3xf32>
}
"""

# Y[N] = cast chain: f32(i32(X * 3)) + f32(f64(X)) ; K[N] = i64 index_cast(N) * 2 (int64)
CASTS = """
func.func @kernel(%X: tensor<5xf32> {ein.name = "X"}) -> (tensor<5xf32>, tensor<5xi64>) {
  %y = ein.einsum "Y" assign parallel [N = 5] : tensor<5xf32> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<5xf32>
    %c = arith.constant 3.0 : f32
    %m = arith.mulf %x, %c : f32
    %i = arith.fptosi %m : f32 to i32
    %f = arith.sitofp %i : i32 to f32
    %d = arith.extf %x : f32 to f64
    %h = arith.truncf %d : f64 to f32
    %r = arith.addf %f, %h : f32
    ein.yield %r : f32
  }
  %k = ein.einsum "K" assign parallel [N = 5] : tensor<5xi64> {
  ^bb0(%N : index):
    %i = arith.index_cast %N : index to i64
    %c = arith.constant -2 : i64
    %r = arith.muli %i, %c : i64
    ein.yield %r : i64
  }
  func.return %y, %k : tensor<5xf32>, tensor<5xi64>
}
"""

# Y[N] = tanh(X) + sqrt(|X|) + floor(X) + round(X * 2.5) + erf(X) + rsqrt(|X|) + pow(|X|, 1.5)
MATH = """
func.func @kernel(%X: tensor<8xf32> {ein.name = "X"}) -> tensor<8xf32> {
  %y = ein.einsum "Y" assign parallel [N = 8] : tensor<8xf32> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<8xf32>
    %a = math.absf %x : f32
    %t = math.tanh %x : f32
    %s = math.sqrt %a : f32
    %f = math.floor %x : f32
    %c = arith.constant 2.5 : f32
    %x2 = arith.mulf %x, %c : f32
    %r = math.round %x2 : f32
    %e = math.erf %x : f32
    %q = math.rsqrt %a : f32
    %k = arith.constant 1.5 : f32
    %p = math.powf %a, %k : f32
    %l = math.log %a : f32
    %s1 = arith.addf %t, %s : f32
    %s2 = arith.addf %s1, %f : f32
    %s3 = arith.addf %s2, %r : f32
    %s4 = arith.addf %s3, %e : f32
    %s5 = arith.addf %s4, %q : f32
    %s6 = arith.addf %s5, %p : f32
    %s7 = arith.addf %s6, %l : f32
    ein.yield %s7 : f32
  }
  func.return %y : tensor<8xf32>
}
"""

# Y[N] = X[N] > W[N] (ordered) ? X[N] : -W[N], with NaNs: unordered compare picks the else side
SELECT_NAN = """
func.func @kernel(%X: tensor<6xf64> {ein.name = "X"}, %W: tensor<6xf64> {ein.name = "W"})
    -> (tensor<6xf64>, tensor<6xi8>) {
  %y = ein.einsum "Y" assign parallel [N = 6] : tensor<6xf64> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<6xf64>
    %w = ein.load %W[%N] : tensor<6xf64>
    %c = arith.cmpf ogt, %x, %w : f64
    %n = arith.negf %w : f64
    %r = arith.select %c, %x, %n : f64
    ein.yield %r : f64
  }
  %u = ein.einsum "U" assign parallel [N = 6] : tensor<6xi8> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<6xf64>
    %w = ein.load %W[%N] : tensor<6xf64>
    %c = arith.cmpf ule, %x, %w : f64
    %r = arith.extui %c : i1 to i8
    ein.yield %r : i8
  }
  func.return %y, %u : tensor<6xf64>, tensor<6xi8>
}
"""

# Y[N] = exp2(X) + log2(|X|) + log10(|X|) + ceil(X) + sin(X) * cos(X) - tan(X) (f64);
# P[N] = ipowi(I[N], E[N]) (i32, negative exponents included)
MATH_F64_AND_IPOW = """
func.func @kernel(%X: tensor<6xf64> {ein.name = "X"}, %I: tensor<6xi32> {ein.name = "I"},
                  %E: tensor<6xi32> {ein.name = "E"}) -> (tensor<6xf64>, tensor<6xi32>) {
  %y = ein.einsum "Y" assign parallel [N = 6] : tensor<6xf64> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<6xf64>
    %a = math.absf %x : f64
    %e = math.exp2 %x : f64
    %l2 = math.log2 %a : f64
    %l10 = math.log10 %a : f64
    %c = math.ceil %x : f64
    %s = math.sin %x : f64
    %co = math.cos %x : f64
    %t = math.tan %x : f64
    %sc = arith.mulf %s, %co : f64
    %r1 = arith.addf %e, %l2 : f64
    %r2 = arith.addf %r1, %l10 : f64
    %r3 = arith.addf %r2, %c : f64
    %r4 = arith.addf %r3, %sc : f64
    %r5 = arith.subf %r4, %t : f64
    ein.yield %r5 : f64
  }
  %p = ein.einsum "P" assign parallel [N = 6] : tensor<6xi32> {
  ^bb0(%N : index):
    %i = ein.load %I[%N] : tensor<6xi32>
    %e = ein.load %E[%N] : tensor<6xi32>
    %r = math.ipowi %i, %e : i32
    ein.yield %r : i32
  }
  func.return %y, %p : tensor<6xf64>, tensor<6xi32>
}
"""


def _math_f64_reference(a: Arrays) -> Arrays:
    x = a["X"]
    y = np.exp2(x) + np.log2(np.abs(x)) + np.log10(np.abs(x)) + np.ceil(x)
    powers = [
        int(b) ** int(e) if e >= 0 else (1 if b == 1 else (-1) ** -int(e) if b == -1 else 0)
        for b, e in zip(a["I"], a["E"])
    ]
    return {"Y": y + np.sin(x) * np.cos(x) - np.tan(x), "P": np.array(powers)}


RETURNED_TWICE = """
func.func @kernel(%X: tensor<4xi32> {ein.name = "X"})
    -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
  %y = ein.einsum "Y" assign parallel [N = 4] : tensor<4xi32> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<4xi32>
    %r = arith.addi %x, %x : i32
    ein.yield %r : i32
  }
  func.return %y, %X, %y : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
}
"""


def _softmax_parts(X: np.ndarray) -> Arrays:
    x = X.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    s = e.sum(axis=1)
    return {"Y": e / s[:, None], "S": s}


def _gather_floordiv_inputs(rng: np.random.Generator) -> Arrays:
    return {
        "T": nonzero(rng, (5,), "float32"),
        "I": rng.integers(-10, 0, (6,)).astype(np.int64),
    }


def _int_ops_reference(a: Arrays) -> Arrays:
    x, d = a["X"].astype(np.int64), a["D"].astype(np.int64)
    y = (
        np.floor_divide(x, d) + 3 * np.fmod(x, d) - (x >> 1) + np.maximum(x, d) - np.minimum(x, 0)
    )
    return {"Y": y}


def _math_reference(a: Arrays) -> Arrays:
    x = a["X"].astype(np.float64)
    ax = np.abs(x)
    x2 = (a["X"] * np.float32(2.5)).astype(np.float64)
    round_away = np.trunc(x2) + np.where(np.abs(x2 - np.trunc(x2)) >= 0.5, np.sign(x2), 0)
    erf = np.vectorize(math.erf)(x)
    y = np.tanh(x) + np.sqrt(ax) + np.floor(x) + round_away + erf + 1 / np.sqrt(ax)
    return {"Y": y + ax**1.5 + np.log(ax)}


def _select_nan_inputs(rng: np.random.Generator) -> Arrays:
    x = nonzero(rng, (6,), "float64")
    w = nonzero(rng, (6,), "float64")
    x[1], w[3], x[5], w[5] = np.nan, np.nan, np.nan, np.nan
    return {"X": x, "W": w}


def _select_nan_reference(a: Arrays) -> Arrays:
    x, w = a["X"], a["W"]
    with np.errstate(invalid="ignore"):
        y = np.where(x > w, x, -w)
        u = (~(x > w)).astype(np.int8)  # ule: unordered or <=
    return {"Y": y, "U": u}


def _and_or_inputs(dtype: str) -> Callable[[np.random.Generator], Arrays]:
    def make(rng: np.random.Generator) -> Arrays:
        x = nonzero(rng, (3, 4), dtype)
        x[0, 2] = 0  # row 0: some zero; row 1: no zero; row 2: all zero
        x[2, :] = 0
        return {"X": x}

    return make


CASES = [
    Case(
        "matmul",
        MATMUL,
        lambda rng: {"A": nonzero(rng, (4, 3), "float32"), "B": nonzero(rng, (3, 5), "float32")},
        lambda a: {"C": a["A"].astype(np.float64) @ a["B"].astype(np.float64)},
    ),
    Case(
        "reduce_max_f32",
        reduction("max", "f32"),
        lambda rng: {"X": -np.abs(nonzero(rng, (3, 4), "float32"))},  # all negative: not 0
        lambda a: {"R": a["X"].astype(np.float64).max(axis=1)},
    ),
    Case(
        "reduce_max_nan",
        reduction("max", "f32"),
        lambda rng: {"X": np.array([[1, np.nan, 2, 3], [4, 5, 6, np.nan], [7, 8, 9, 1]], "f4")},
        lambda a: {"R": a["X"].astype(np.float64).max(axis=1)},
    ),
    Case(
        "reduce_min_i32",
        reduction("min", "i32"),
        lambda rng: {"X": np.abs(nonzero(rng, (3, 4), "int32")) + 1000},  # all > 0
        lambda a: {"R": a["X"].astype(np.int64).min(axis=1)},
    ),
    Case(
        "reduce_mul_f64",
        reduction("mul", "f64"),
        lambda rng: {"X": nonzero(rng, (3, 4), "float64")},
        lambda a: {"R": a["X"].prod(axis=1)},
    ),
    Case(
        "reduce_and_i8",
        reduction("and", "i8"),
        _and_or_inputs("int8"),
        lambda a: {"R": np.all(a["X"] != 0, axis=1).astype(np.int64)},
    ),
    Case(
        "reduce_or_f32",
        reduction("or", "f32"),
        _and_or_inputs("float32"),
        lambda a: {"R": np.any(a["X"] != 0, axis=1).astype(np.float64)},
    ),
    Case(
        "pad",
        PAD,
        lambda rng: {"A": nonzero(rng, (4,), "float32")},
        lambda a: {"P": np.pad(a["A"].astype(np.float64), (1, 1))},
    ),
    Case(
        "gather",
        GATHER,
        lambda rng: {"T": nonzero(rng, (5, 3), "float64"), "I": np.array([4, 0, 2, 0], np.int32)},
        lambda a: {"G": a["T"][a["I"]]},
    ),
    Case(
        "gather_floordiv",
        GATHER_FLOORDIV,
        _gather_floordiv_inputs,
        lambda a: {"G": a["T"].astype(np.float64)[a["I"] // 2 + 5]},
    ),
    Case(
        "multi_statement",
        MULTI,
        lambda rng: {"X": nonzero(rng, (3, 4), "float32")},
        lambda a: _softmax_parts(a["X"]),
    ),
    Case(
        "rank0",
        RANK0,
        lambda rng: {"X": nonzero(rng, (5,), "float64"), "s": np.array(1.5)},
        lambda a: {
            "T": np.array((a["X"] * 1.5).sum()),
            "U": a["X"] * (a["X"] * 1.5).sum(),
        },
    ),
    Case(
        "f16",
        F16,
        lambda rng: {"X": nonzero(rng, (8,), "float16")},
        lambda a: {
            "Y": np.exp(a["X"].astype(np.float64)) * a["X"] + 1,
            "Z": np.array(a["X"].astype(np.float64).sum()),
        },
        rtol={"Y": 4e-3, "Z": 4e-3},
    ),
    Case(
        "i8_wraps",
        I8,
        lambda rng: {
            "X": np.array([100, -100, 7, 127, -128, 3], np.int8),
            "W": np.array([3, 5, -9, 1, -1, 1], np.int8),
        },
        lambda a: {
            "Y": (a["X"].astype(np.int64) * a["W"] + 100 + 128) % 256 - 128,
            "Z": (((a["X"].astype(np.int64) + a["W"] + 128) % 256 - 128) > 3).astype(np.int64),
        },
    ),
    Case(
        "int_ops",
        INT_OPS,
        lambda rng: {"X": nonzero(rng, (7,), "int32") * 7, "D": nonzero(rng, (7,), "int32")},
        _int_ops_reference,
    ),
    Case(
        "affine_divmod",
        AFFINE_DIVMOD,
        lambda rng: {"X": nonzero(rng, (3, 2), "float32")},
        lambda a: {"Y": a["X"].astype(np.float64).reshape(6), "Z": a["X"][:, 1].astype(np.float64)},
    ),
    Case(
        "casts",
        CASTS,
        lambda rng: {"X": nonzero(rng, (5,), "float32")},
        lambda a: {
            "Y": np.trunc(a["X"] * np.float32(3)).astype(np.float64) + a["X"],
            "K": np.arange(5) * -2,
        },
    ),
    Case(
        "math",
        MATH,
        lambda rng: {"X": nonzero(rng, (8,), "float32")},
        _math_reference,
        rtol={"Y": 1e-5},
    ),
    Case(
        "math_f64_ipowi",
        MATH_F64_AND_IPOW,
        lambda rng: {
            "X": nonzero(rng, (6,), "float64"),
            "I": np.array([2, -3, 1, -1, 5, 7], np.int32),
            "E": np.array([10, 3, -4, -3, 0, -1], np.int32),
        },
        _math_f64_reference,
        rtol={"Y": 1e-13},
    ),
    Case("select_nan", SELECT_NAN, _select_nan_inputs, _select_nan_reference),
    Case(
        "returned_twice",
        RETURNED_TWICE,
        lambda rng: {"X": nonzero(rng, (4,), "int32")},
        lambda a: {"Y": 2 * a["X"].astype(np.int64), "X": a["X"].astype(np.int64)},
    ),
]
CASE_IDS = [c.name for c in CASES]


# ---- the interpreter against NumPy -------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_interpreter_matches_numpy(case: Case) -> None:
    inputs = case.inputs(np.random.default_rng(7))
    module = lower(case.ir)
    got = run_interpreted(module, inputs)
    check_outputs(case, got, inputs)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_target_pipeline_keeps_semantics(case: Case) -> None:
    """After the C target's pipeline (f16 legalised, canonicalised): same results."""
    inputs = case.inputs(np.random.default_rng(8))
    module = lower(case.ir, "convert-ein-to-affine,legalize-f16-for-c,canonicalize,cse")
    check_outputs(case, run_interpreted(module, inputs), inputs)


# ---- the shape of the lowered IR ---------------------------------------------------------------


def ops_of(module: ModuleOp, op_type: type) -> list:
    return [op for op in module.walk() if isinstance(op, op_type)]


def test_signature_appends_outputs_with_names() -> None:
    module = lower(MULTI)
    kernel = module.body.block.first_op
    assert isinstance(kernel, func.FuncOp)
    assert not kernel.function_type.outputs
    signature = KernelSignature.from_function(kernel)
    assert [(b.name, b.shape, b.is_output) for b in signature.buffers] == [
        ("X", (3, 4), False),
        ("Y", (3, 4), True),
        ("S", (3,), True),
    ]
    # M is internal: allocated and freed; S is written into its output argument
    (alloc,) = ops_of(module, memref.AllocOp)
    assert alloc.attributes["ein.name"].data == "M"
    assert len(ops_of(module, memref.DeallocOp)) == 1
    assert not ops_of(module, ein.EinsumOp) and not ops_of(module, ein.LoadOp)
    assert not ops_of(module, bufferization.ToTensorOp)


def test_reduction_fills_identity_then_accumulates() -> None:
    module = lower(MATMUL)
    kernel = module.body.block.first_op
    fill, compute = [op for op in kernel.body.block.ops if isinstance(op, affine.ForOp)]
    assert _depth(fill) == 2 and _depth(compute) == 3
    loads = ops_of(compute, affine.LoadOp)
    assert len(loads) == 3  # A, B, and the accumulator
    assert not ops_of(module, memref.LoadOp)


def _depth(loop: affine.ForOp) -> int:
    inner = [op for op in loop.body.block.ops if isinstance(op, affine.ForOp)]
    return 1 + (_depth(inner[0]) if inner else 0)


def test_affine_index_composes_into_map_and_gather_uses_memref_load() -> None:
    module = lower(AFFINE_DIVMOD)
    assert not ops_of(module, affine.ApplyOp)
    maps = [str(load.map.data) for load in ops_of(module, affine.LoadOp)]
    assert "(d0) -> ((d0 floordiv 2), (d0 mod 2))" in maps
    module = lower(GATHER)
    (gathered,) = ops_of(module, memref.LoadOp)
    assert len(ops_of(module, affine.LoadOp)) == 1  # the index load I[F] stays affine
    assert gathered.memref.name_hint == "T"


def test_guarded_load_stays_inside_its_branch() -> None:
    module = lower(PAD)
    (branch,) = ops_of(module, scf.IfOp)
    loads = ops_of(module, affine.LoadOp)
    assert len(loads) == 1 and loads[0].parent_op() is branch


def test_guarded_access_is_never_performed() -> None:
    """The interpreter checks every access: the unguarded variant fails, the guarded one
    performs exactly the 4 in-range loads."""
    a = np.arange(1, 5, dtype=np.float32)
    with pytest.raises(InterpretationError, match="out-of-bounds"):
        run_interpreted(lower(UNGUARDED_PAD), {"A": a})

    module = lower(PAD)
    interp = make_interpreter(module)
    loads: list[tuple[int, ...]] = []

    class CountLoads(Interpreter.Listener):
        def will_interpret_op(self, op, args) -> None:  # type: ignore[no-untyped-def]
            if isinstance(op, affine.LoadOp):
                loads.append(tuple(args[1:]))

    interp.listeners = (CountLoads(),)
    out = np.full(6, np.nan, np.float32)
    interp.call_op("kernel", (a, out))
    assert sorted(loads) == [(1,), (2,), (3,), (4,)]  # N = 1..4: A[N - 1]
    np.testing.assert_array_equal(out, [0, 1, 2, 3, 4, 0])


def test_returned_twice_and_returned_input_are_copies() -> None:
    module = lower(RETURNED_TWICE)
    signature = KernelSignature.from_module(module)
    assert [b.name for b in signature.outputs] == ["Y", "X", "Y"]
    a = np.array([1, -2, 3, 4], np.int32)
    interp = make_interpreter(module)
    outs = [np.zeros(4, np.int32) for _ in range(3)]
    interp.call_op("kernel", (a, *outs))
    np.testing.assert_array_equal(outs[0], 2 * a)
    np.testing.assert_array_equal(outs[1], a)
    np.testing.assert_array_equal(outs[2], 2 * a)


def test_f16_legalized_to_f32_compute() -> None:
    module = lower(F16, "convert-ein-to-affine,legalize-f16-for-c")
    text = str(module)
    assert "math.exp %" in text and ": f16" in text
    for op in module.walk():
        if op.name in ("math.exp", "arith.mulf", "arith.addf"):
            assert all(str(t) == "f32" for t in op.result_types), op


def test_interpreter_rejects_bad_arrays() -> None:
    module = lower(MATMUL)
    a, b = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
    with pytest.raises(RuntimeInputError, match="dtype float64"):
        run_interpreted(module, {"A": a.astype(np.float64), "B": b})
    with pytest.raises(RuntimeInputError, match="missing input 'B'"):
        run_interpreted(module, {"A": a})
    with pytest.raises(RuntimeInputError, match="shape"):
        run_interpreted(module, {"A": a, "B": b.T})


def test_pass_is_idempotent_on_lowered_ir() -> None:
    module = lower(MATMUL)
    before = str(module)
    run_pipeline(make_context(), module, "convert-ein-to-affine")
    assert str(module) == before


@pytest.mark.parametrize("case", [c for c in CASES if c.name in ("pad", "affine_divmod", "matmul")])
def test_reparsed_affine_maps_with_symbols_interpret(case: Case) -> None:
    """Affine accesses parsed back from text use symbols (`()[s0] -> (s0)`): same results."""
    reparsed = parse(str(lower(case.ir)))
    assert any(load.map.data.num_symbols for load in ops_of(reparsed, affine.LoadOp))
    inputs = case.inputs(np.random.default_rng(9))
    check_outputs(case, run_interpreted(reparsed, inputs), inputs)
