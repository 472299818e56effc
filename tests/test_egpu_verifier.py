"""verify-egpu, the kernel-level IR verifier (einc/passes/verify_egpu.py).

Positive: with `EINC_VERIFY_EACH=1` (the verifier and xDSL's op verifiers after every pass
of every pipeline the driver runs) it accepts the lowering of every conformance program
(tests/programs.py) on each device target, and of the scheduled families the device tests
run: shared-memory staging, register tiles in local memory, cross-thread reductions (trees
in shared memory, subgroup reductions), and the device regressions.
Negative: hand-made egpu IR breaking each rule is rejected with an InternalCompilerError
(never an EincError) whose message names the kernel and the value or buffer. The switches:
`EINC_VERIFY_EACH` in `run_pipeline`, `einc-opt --verify-each`.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from einc.dialects.context import make_context
from einc.compiler.driver import Compilation
from einc.errors import EincError, InternalCompilerError, TargetError
from einc.compiler.registry import run_pipeline
from einc.passes.verify_egpu import verify_egpu
from tests.test_conformance import ALL
from tests.test_device_differential import REFUSED_BY_DESIGN

DEVICES = ("opencl", "sycl", "hlsl", "poplar", "cuda", "hip")


@pytest.fixture
def verify_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EINC_VERIFY_EACH", "1")


# ---- accepted: every lowering of the existing programs -------------------------------------------


@pytest.mark.parametrize("target", DEVICES)
def test_accepts_every_conformance_program(target: str, verify_each: None) -> None:
    lowered = 0
    for prog in ALL:
        comp = Compilation(prog.ir, f"<{prog.name}>", prog.input_dict, prog.extra_outputs, target)
        try:
            comp.run_until("target")
        except TargetError as err:
            if REFUSED_BY_DESIGN.search(err.message):
                continue
            raise
        lowered += 1
    assert lowered >= len(ALL) - 3


def scheduled_families() -> list[tuple[str, Callable[[str], Compilation]]]:
    from tests.test_cross_thread_reduce import DOT, compile_rows, rows
    from tests.test_device_local import matmul as local_matmul
    from tests.test_device_local import register_blocked, register_blocked_shared
    from tests.test_device_regressions import CASES
    from tests.test_device_schedules import matmul as staged_matmul

    def reduction(tile: int | None, rows_per_block: int | None, k: int) -> Callable[[str], Compilation]:
        shapes = {"input0": [6, k], "input1": [6, k]}
        return lambda t: compile_rows(DOT, shapes, "float32", t, rows(tile, rows_per_block))

    families: list[tuple[str, Callable[[str], Compilation]]] = [
        ("staged_matmul", lambda t: staged_matmul(32, 32, 32, 8, t)),
        ("staged_matmul_partial_tiles", lambda t: staged_matmul(37, 45, 29, 8, t)),
        ("register_blocked", lambda t: local_matmul(32, 48, 20, t, register_blocked(unroll=True))),
        ("register_blocked_partial", lambda t: local_matmul(37, 45, 29, t, register_blocked(unroll=False))),
        ("register_blocked_shared", lambda t: local_matmul(32, 48, 24, t, register_blocked_shared())),
        ("cross_thread_tree", reduction(None, None, 24)),
        ("cross_thread_tiled", reduction(8, 2, 29)),
        ("cross_thread_two_warps", reduction(64, None, 200)),
    ]
    families += [(c.name, c.compilation) for c in CASES]
    return families


@pytest.mark.parametrize("target", ("opencl", "hlsl", "sycl", "cuda", "hip"))
@pytest.mark.parametrize("family", scheduled_families(), ids=lambda f: f[0] if isinstance(f, tuple) else f)
def test_accepts_scheduled_lowerings(target: str, family: tuple[str, Callable[[str], Compilation]], verify_each: None) -> None:
    _, build = family
    comp = build(target)
    comp.run_until("target")
    assert any(op.name == "egpu.func" for op in comp.results["target"].walk())


# ---- rejected: hand-made IR ---------------------------------------------------------------------


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def rejected(text: str) -> str:
    module = parse(text)
    with pytest.raises(InternalCompilerError) as info:
        verify_egpu(module)
    assert not isinstance(info.value, EincError)
    assert "bug in einc" in str(info.value)
    return info.value.message


def accepted(text: str) -> None:
    verify_egpu(parse(text))


SHARED_HEAD = """
egpu.func @k(%x: memref<64xf32>, %out: memref<64xf32>) grid [1, 1, 1] block [64, 1, 1] {
  %partials = egpu.alloc_shared : memref<65xf32>
  %t = egpu.thread_id x
  %v = affine.load %x[%t] : memref<64xf32>
"""
SHARED_TAIL = """
  egpu.return
}
"""


def shared(body: str) -> str:
    return SHARED_HEAD + body + SHARED_TAIL


def test_rejects_a_use_before_the_definition() -> None:
    message = rejected("""
egpu.func @late(%out: memref<f32>) grid [1, 1, 1] block [1, 1, 1] {
  affine.store %late, %out[] : memref<f32>
  %late = arith.constant 1.0 : f32
  egpu.return
}""")
    assert "egpu.func @late: value %late (result 0 of arith.constant) is used by affine.store before its definition" in message


def test_rejects_a_value_of_the_host() -> None:
    module = parse("""
func.func @host(%out: memref<f32>) {
  %c = arith.constant 2.0 : f32
  egpu.launch @k(%out) : memref<f32>
  func.return
}
egpu.func @k(%out: memref<f32>) grid [1, 1, 1] block [1, 1, 1] {
  %one = arith.constant 1.0 : f32
  affine.store %one, %out[] : memref<f32>
  egpu.return
}""")
    host = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    constant = next(op for op in host.walk() if isinstance(op, arith.ConstantOp))
    store = next(op for op in module.walk() if op.name == "affine.store")
    store.operands[0] = constant.result
    with pytest.raises(InternalCompilerError, match="value %c .* is used by affine.store but is defined outside the kernel"):
        verify_egpu(module)


def test_rejects_a_private_buffer_filled_in_one_kernel_and_read_in_another() -> None:
    text = """
egpu.func @fill(%x: memref<f32>) grid [1, 1, 1] block [1, 1, 1] {
  %tile = memref.alloca() : memref<f32>
  %v = affine.load %x[] : memref<f32>
  affine.store %v, %tile[] : memref<f32>
  egpu.return
}
egpu.func @use(%out: memref<f32>) grid [1, 1, 1] block [1, 1, 1] {
  %tile = memref.alloca() : memref<f32>
  %v = affine.load %tile[] : memref<f32>
  affine.store %v, %out[] : memref<f32>
  egpu.return
}"""
    message = rejected(text)
    assert "egpu.func @fill: private buffer %tile (result 0 of memref.alloca) is written but never read" in message
    message = rejected(text[text.index("egpu.func @use"):])
    assert "egpu.func @use: private buffer %tile (result 0 of memref.alloca) is read but never written" in message


def test_rejects_a_private_buffer_read_before_it_is_written() -> None:
    message = rejected("""
egpu.func @early(%x: memref<4xf32>, %out: memref<4xf32>) grid [1, 1, 1] block [1, 1, 1] {
  %row = memref.alloca() {ein.name = "row"} : memref<4xf32>
  affine.for %i = 0 to 4 {
    %old = affine.load %row[%i] : memref<4xf32>
    affine.store %old, %out[%i] : memref<4xf32>
    %v = affine.load %x[%i] : memref<4xf32>
    affine.store %v, %row[%i] : memref<4xf32>
  }
  egpu.return
}""")
    assert "private buffer 'row' %row (result 0 of memref.alloca) is read by affine.load before it is written" in message


def test_rejects_a_private_buffer_of_the_host_launched() -> None:
    message = rejected("""
func.func @host(%out: memref<f32>) {
  %tile = memref.alloca() : memref<f32>
  egpu.launch @k(%tile) : memref<f32>
  func.return
}
egpu.func @k(%b: memref<f32>) grid [1, 1, 1] block [1, 1, 1] {
  egpu.return
}""")
    assert "egpu.launch @k: private buffer %tile (result 0 of memref.alloca) of the host is passed to a kernel" in message


def test_rejects_a_neighbours_shared_element_read_without_a_barrier() -> None:
    message = rejected(shared("""
  affine.store %v, %partials[%t] : memref<65xf32>
  %w = affine.load %partials[%t + 1] : memref<65xf32>
  affine.store %w, %out[%t] : memref<64xf32>"""))
    assert "egpu.func @k: shared buffer %partials (result 0 of egpu.alloc_shared) is written by affine.store" in message
    assert "no egpu.barrier between" in message


def test_accepts_a_neighbours_shared_element_read_after_a_barrier() -> None:
    accepted(shared("""
  affine.store %v, %partials[%t] : memref<65xf32>
  egpu.barrier
  %w = affine.load %partials[%t + 1] : memref<65xf32>
  affine.store %w, %out[%t] : memref<64xf32>"""))


def test_accepts_a_work_items_own_shared_element_without_a_barrier() -> None:
    accepted(shared("""
  affine.store %v, %partials[%t] : memref<65xf32>
  %w = affine.load %partials[%t] : memref<65xf32>
  affine.store %w, %out[%t] : memref<64xf32>"""))


def test_rejects_one_shared_element_every_work_item_writes() -> None:
    """The same index, but not derived from the thread id: every work-item writes it."""
    rejected(shared("""
  %c0 = arith.constant 0 : index
  affine.store %v, %partials[%c0] : memref<65xf32>
  %w = affine.load %partials[%c0] : memref<65xf32>
  affine.store %w, %out[%t] : memref<64xf32>"""))


def test_rejects_a_write_reaching_the_next_iterations_read_without_a_barrier() -> None:
    """Around a loop's back edge: the write at the end of one iteration reaches the read at
    the start of the next."""
    loop = """
  affine.for %i = 0 to 4 {
    %w = affine.load %partials[%t + 1] : memref<65xf32>
    affine.store %w, %out[%t] : memref<64xf32>
    egpu.barrier
    affine.store %v, %partials[%t] : memref<65xf32>
    %s
  }"""
    assert "shared buffer %partials" in rejected(shared(loop.replace("%s", "")))
    accepted(shared(loop.replace("%s", "egpu.barrier")))


def test_rejects_a_barrier_on_one_branch_only() -> None:
    branch = """
  affine.store %v, %partials[%t] : memref<65xf32>
  %c32 = arith.constant 32 : index
  %low = arith.cmpi slt, %t, %c32 : index
  scf.if %low {
    egpu.barrier
  } %else
  %w = affine.load %partials[%t + 1] : memref<65xf32>
  affine.store %w, %out[%t] : memref<64xf32>"""
    assert "shared buffer %partials" in rejected(shared(branch.replace("%else", "")))
    accepted(shared(branch.replace("%else", "else {\n    egpu.barrier\n  }")))


# ---- the switches ---------------------------------------------------------------------------------

USE_BEFORE_DEF = """
egpu.func @late(%out: memref<f32>) grid [1, 1, 1] block [1, 1, 1] {
  affine.store %late, %out[] : memref<f32>
  %late = arith.constant 1.0 : f32
  egpu.return
}
"""


def test_run_pipeline_verifies_each_pass_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """`EINC_VERIFY_EACH=1`: run_pipeline (every driver stage) verifies after each pass; the
    pass here changes nothing, so the broken kernel is reported after it."""
    module = parse(USE_BEFORE_DEF)
    monkeypatch.delenv("EINC_VERIFY_EACH", raising=False)
    run_pipeline(make_context(), module, "legalize-f16-storage")
    monkeypatch.setenv("EINC_VERIFY_EACH", "1")
    with pytest.raises(InternalCompilerError, match="after legalize-f16-storage: egpu.func @late: value %late"):
        run_pipeline(make_context(), module, "legalize-f16-storage")


def test_einc_opt_verify_each(tmp_path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from einc.opt import main

    monkeypatch.setenv("EINC_REPRO_DIR", str(tmp_path / "repro"))  # the internal error's reproducer

    path = tmp_path / "late.mlir"
    path.write_text(USE_BEFORE_DEF)
    assert main([str(path), "-p", "legalize-f16-storage"]) == 0
    capsys.readouterr()
    assert main([str(path), "-p", "legalize-f16-storage", "--verify-each"]) == 2
    err = capsys.readouterr().err
    assert "after legalize-f16-storage: egpu.func @late: value %late" in err and "bug in einc" in err


# ---- verifying only what changed ------------------------------------------------------------------

IN_ORDER = USE_BEFORE_DEF.replace(
    "  affine.store %late, %out[] : memref<f32>\n  %late = arith.constant 1.0 : f32\n",
    "  %late = arith.constant 1.0 : f32\n  affine.store %late, %out[] : memref<f32>\n",
)


def test_a_pass_that_changes_nothing_is_not_verified_again_and_one_that_breaks_the_ir_is() -> None:
    """`verifying` skips the verification after a pass that leaves the IR as it was last
    verified (the same IR, the same answer), and still reports the pass that broke it."""
    from dataclasses import dataclass

    from xdsl.context import Context
    from xdsl.passes import ModulePass, PassPipeline

    from einc.passes import verify_egpu as module_

    @dataclass(frozen=True)
    class Nothing(ModulePass):
        name = "test-nothing"

        def apply(self, ctx: Context, op: ModuleOp) -> None:
            pass

    @dataclass(frozen=True)
    class Swap(ModulePass):
        name = "test-swap"

        def apply(self, ctx: Context, op: ModuleOp) -> None:
            constant = next(o for o in op.walk() if isinstance(o, arith.ConstantOp))
            store, block = constant.next_op, constant.parent_block()
            assert store is not None and block is not None
            constant.detach()
            block.insert_op_after(constant, store)

    verified: list[str] = []
    real = module_.verify_after_pass

    def counting(previous: ModulePass, module: ModuleOp, following: ModulePass | None) -> None:
        verified.append(previous.name)
        real(previous, module, following)

    pipeline = module_.verifying(PassPipeline((Nothing(), Nothing(), Swap(), Nothing())))
    saved, module_.verify_after_pass = module_.verify_after_pass, counting
    try:
        with pytest.raises(InternalCompilerError, match="after test-swap: egpu.func @late: value %late"):
            pipeline.apply(make_context(), parse(IN_ORDER))
    finally:
        module_.verify_after_pass = saved
    assert verified == ["test-nothing", "test-swap"]


def test_the_ir_state_sees_every_change_a_verifier_reads() -> None:
    """`ir_state` differs after each kind of change a pass can make: an op moved, erased or
    added, an operand replaced, an attribute or property set, a result's or a block
    argument's type changed, a block argument added, a location changed."""
    from xdsl.dialects.builtin import FileLineColLoc, FloatAttr, IntAttr, StringAttr, f32, f64, i32
    from xdsl.ir import Block

    from einc.passes.verify_egpu import ir_state

    def changes(edit: Callable[[ModuleOp], None]) -> bool:
        module = parse(IN_ORDER)
        before = ir_state(module)
        assert ir_state(module) == before
        edit(module)
        return ir_state(module) != before

    def constant(m: ModuleOp) -> arith.ConstantOp:
        return next(o for o in m.walk() if isinstance(o, arith.ConstantOp))

    def kernel_block(m: ModuleOp) -> Block:
        block = constant(m).parent_block()
        assert block is not None
        return block

    def moved(m: ModuleOp) -> None:
        c, block = constant(m), kernel_block(m)
        store = c.next_op
        assert store is not None
        c.detach()
        block.insert_op_after(c, store)

    def erased(m: ModuleOp) -> None:
        c = constant(m)
        c.detach()

    def added(m: ModuleOp) -> None:
        kernel_block(m).insert_op_before(arith.ConstantOp.from_int_and_width(1, 32), constant(m))

    def operand(m: ModuleOp) -> None:
        c, block = constant(m), kernel_block(m)
        other = arith.ConstantOp(c.value)
        block.insert_op_before(other, c)
        before = ir_state(m)
        c.result.replace_all_uses_with(other.result)
        assert ir_state(m) != before  # only the store's operand differs

    def attribute(m: ModuleOp) -> None:
        constant(m).attributes["x"] = IntAttr(1)

    def property_(m: ModuleOp) -> None:
        constant(m).properties["value"] = FloatAttr(2.0, f32)

    def result_type(m: ModuleOp) -> None:
        setattr(constant(m).result, "_type", f64)  # xDSL gives a value's type no setter

    def block_arg(m: ModuleOp) -> None:
        kernel_block(m).insert_arg(i32, 0)

    def block_arg_type(m: ModuleOp) -> None:
        setattr(kernel_block(m).args[0], "_type", i32)

    def location(m: ModuleOp) -> None:
        constant(m).location = FileLineColLoc(StringAttr("x.ein"), IntAttr(1), IntAttr(2))

    for edit in (moved, erased, added, operand, attribute, property_, result_type, block_arg, block_arg_type, location):
        assert changes(edit), edit.__name__


def test_the_ir_state_sees_a_changed_successor() -> None:
    from xdsl.dialects import cf, test
    from xdsl.ir import Block, Region

    from einc.passes.verify_egpu import ir_state

    b1, b2, b3 = Block(), Block(), Block()
    branch = cf.BranchOp(b2)
    b1.add_op(branch)
    b2.add_op(cf.BranchOp(b3))
    b3.add_op(cf.BranchOp(b1))
    module = ModuleOp([test.TestOp(regions=[Region([b1, b2, b3])])])
    before = ir_state(module)
    branch.successors = [b3]
    assert ir_state(module) != before
