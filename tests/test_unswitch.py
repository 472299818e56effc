"""einc.transforms.unswitch: the mechanism's refusals are Failure values that leave the IR
as it was (the rewrites themselves: lit passes/einc-unswitch.mlir, and the Poplar and C
kernels of tests/test_poplar.py and tests/test_schedules.py against NumPy)."""

from __future__ import annotations

import pytest
from xdsl.dialects import affine, scf
from xdsl.parser import Parser

from einc.dialects.context import make_context
from einc.transforms.loop_build import Failure
from einc.transforms.unswitch import unswitch_loop

_GUARDED = """
builtin.module {{
  func.func @f(%A: memref<8xf32>, %n: index, %d: index) {{
    affine.for %K = 0 to 8 {{
      {condition}
      scf.if %g {{
        %a = affine.load %A[%K] : memref<8xf32>
        affine.store %a, %A[0] : memref<8xf32>
        {extra}
      }}
    }}
    func.return
  }}
}}
"""


@pytest.mark.parametrize(("condition", "extra", "message"), [
    ("%g = arith.cmpi slt, %K, %n : index", "", "the guard's condition changes in it"),
    ("%q = arith.divsi %n, %d : index\n      %g = arith.cmpi slt, %q, %n : index", "",
     "the guard's condition changes in it"),  # a division may trap: not hoisted
    ("%g = arith.cmpi slt, %d, %n : index", "egpu.barrier", "holds 'egpu.barrier', which the work-items must reach together"),
], ids=["varies", "traps", "barrier"])  # fmt: skip
def test_refusals_leave_the_ir_unchanged(condition: str, extra: str, message: str) -> None:
    module = Parser(make_context(), _GUARDED.format(condition=condition, extra=extra)).parse_module()
    before = str(module)
    (loop,) = [op for op in module.walk() if isinstance(op, affine.ForOp)]
    (guard,) = [op for op in module.walk() if isinstance(op, scf.IfOp)]
    made = unswitch_loop(loop, guard)
    assert isinstance(made, Failure) and message in made.message
    assert str(module) == before


def test_invariant_guard_versions_the_loop() -> None:
    module = Parser(make_context(), _GUARDED.format(condition="%g = arith.cmpi slt, %d, %n : index", extra="")).parse_module()
    (loop,) = [op for op in module.walk() if isinstance(op, affine.ForOp)]
    (guard,) = [op for op in module.walk() if isinstance(op, scf.IfOp)]
    made = unswitch_loop(loop, guard)
    assert not isinstance(made, Failure)
    versioned = loop.parent_op()
    assert isinstance(versioned, scf.IfOp) and made[0] is loop and made[1].parent_op() is versioned
    assert not any(isinstance(op, scf.IfOp) for op in made[0].walk())
    assert not any(isinstance(op, affine.StoreOp) for op in made[1].walk())  # the else: nothing
    assert unswitch_loop(made[0], versioned).message.endswith("the guard is not inside it")  # type: ignore[union-attr]
