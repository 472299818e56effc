"""Refusals of a kernel's memory after the schedule (CUDA's local arrays per work-item,
Poplar's tile memory per vertex) point at the schedule op that made the local array
responsible (`einc.staged_loc`), not at `<target>:1:1`. Compile only: no device needed."""

from __future__ import annotations

import pytest

from einc.compiler.driver import Compilation
from einc.errors import TargetError
from tests.test_schedules import script

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"


def _refusal(prog: str, inputs: dict, target: str, text: str) -> TargetError:
    with pytest.raises(TargetError) as info:
        Compilation(prog, "<p>", inputs, None, target, text).run_until("source")
    return info.value


def test_cuda_local_arrays_over_the_limit_point_at_the_largest_cache_op() -> None:
    f64 = {"dtype": "float64", "shape": [128, 128]}
    err = _refusal(MATMUL, {"input0": f64, "input1": f64}, "cuda", script(
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%r = transform.einc.cache_read "input0" at %n',
        '%c = transform.einc.cache_read "input1" at %n'))
    assert "bytes of local arrays per work-item" in err.message
    assert err.loc is not None and (err.loc.file, err.loc.line, err.loc.col) == ("<schedule>", 5, 5), err.render()


@pytest.mark.parametrize("cached", [False, True])
def test_poplar_tile_memory_points_at_the_cache_op_that_overflows_it(cached: bool) -> None:
    """A row of 614,400 bytes fits a tile (638,976); its 64 KiB cached tile does not."""
    prog, inputs = "output0[N] +=! input0[N, K]", {"input0": {"dtype": "float32", "shape": [1, 153600]}}
    lines = ['%k = transform.einc.match stmt "output0" axis "K" in %root', "%o, %i = transform.einc.tile %k by 16384"]
    if not cached:
        Compilation(prog, "<p>", inputs, None, "poplar", script(*lines)).run_until("source")
        return
    err = _refusal(prog, inputs, "poplar", script(*lines, '%c = transform.einc.cache_read "input0" at %o'))
    assert "bytes of tile memory per vertex" in err.message
    assert err.loc is not None and (err.loc.file, err.loc.line, err.loc.col) == ("<schedule>", 5, 5), err.render()


def test_rfactor_partials_inside_a_loop_are_attributed_to_the_rfactor() -> None:
    """The partials an rfactor makes in a compute_at's loop are a local array of its own."""
    from xdsl.dialects import memref

    from einc.ir.attrs import STAGED_LOC_ATTR

    prog = "temp1[N] +=! input0[N, K]; output0[N] = temp1[N] * 2.0"
    module = Compilation(prog, "<p>", {"input0": {"dtype": "float32", "shape": [4, 8]}}, None, "c", script(
        '%c = transform.einc.match stmt "output0" axis "N" in %root',
        '%p = transform.einc.match stmt "temp1" axis "N" in %root', "transform.einc.compute_at %p at %c",
        '%k = transform.einc.match stmt "temp1" axis "K" in %root', "%a, %b = transform.einc.rfactor %k by 2",
    )).run_until("scheduled")
    staged = {op.attributes["ein.name"].data: op.attributes.get(STAGED_LOC_ATTR)  # type: ignore[attr-defined]
              for op in module.walk() if isinstance(op, memref.AllocaOp)}  # fmt: skip
    assert staged["temp1_local"].data == "<schedule>:5:5"  # type: ignore[union-attr]
    assert staged["temp1_local_rf"].data == "<schedule>:7:5"  # type: ignore[union-attr]


def test_poplar_tile_memory_without_local_arrays_points_at_the_statement() -> None:
    """A row of input0 (1.2 MB for the unsplit vertex) overflows a tile whatever the
    schedule: the refusal points at the output of the statement the kernel computes."""
    prog = "temp1[N] = input1[N] + 1.0; output0[N] +=! input0[N, K] * temp1[N]"
    inputs = {"input0": {"dtype": "float32", "shape": [2, 153600]}, "input1": {"dtype": "float32", "shape": [2]}}
    err = _refusal(prog, inputs, "poplar", "default")
    assert "kernel_output0 needs" in err.message and "bytes of tile memory" in err.message
    assert err.loc is not None and (err.loc.file, err.loc.line, err.loc.col) == ("<p>", 1, 29), err.render()


def test_a_launch_limit_without_a_schedule_op_names_the_kernels_tensor() -> None:
    """check_launch without a responsible schedule op: a KernelError the driver places at
    the statement writing `tensor`."""
    from einc.targets.cuda import CUDATarget
    from einc.targets.descriptions import KernelError

    desc = CUDATarget.limits
    with pytest.raises(KernelError) as info:
        desc.check_launch("kernel_output0", (1, 1, 1), (1, 1, 1), 0, desc.private_memory + 4, None, "output0")
    assert info.value.tensor == "output0"


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_a_printer_meeting_ir_it_cannot_print_is_an_internal_error(target: str) -> None:
    """IR an earlier pass should not have produced is a bug in einc, not a user's error."""
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import i32

    from einc.errors import EincError, InternalCompilerError
    from einc.targets import get_target

    module = Compilation("output0[N] = input0[N] + 1.0", "<p>", {"input0": {"dtype": "float32", "shape": [4]}},
                         None, target, None).run_until("target").clone()  # fmt: skip
    module.body.block.add_op(arith.ConstantOp.from_int_and_width(1, i32))
    with pytest.raises(InternalCompilerError, match="cannot print top-level arith.constant") as info:
        get_target(target).emit(module)
    assert not isinstance(info.value, EincError)
