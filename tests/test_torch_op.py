"""einc.torch.op: einc kernels as PyTorch custom ops, eager, under torch.compile and in
torch.export, against torch itself and a float64 reference; one op takes every shape its
program can (a kernel compiled per shape signature: the last, partial batch of an epoch, a
dynamic batch under torch.compile and a `Dim` in torch.export); bad inputs get clear, located
errors; `.tune()` writes records per shape that later ops (in this process and in a new one) use.

torch comes from the [torch] extra; without it these tests skip, except in CI (`CI` set),
where a missing torch fails them."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    if os.environ.get("CI"):
        raise
    pytest.skip("torch is not installed: pip install -e '.[torch]'", allow_module_level=True)

import einc
import einc.torch
from einc.targets import get_target
from einc.errors import EincError, RuntimeInputError, SemanticError, TargetError, UsageError
from einc.tune.records import RecordDB
from einc.compiler.records import record_context
from einc.tune.types import TuneTask

ROOT = Path(__file__).resolve().parent.parent
MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"


def rand(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Uniform in [0.5, 2): no zeros, no cancellation to hide a wrong kernel."""
    return (torch.rand(*shape, generator=gen, dtype=torch.float64) * 1.5 + 0.5).to(dtype)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


def close(got: torch.Tensor, want: torch.Tensor, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol)


# ---- eager results ---------------------------------------------------------------------------
def test_matmul_from_an_input_dict_matches_torch(gen: torch.Generator) -> None:
    a, b = rand(gen, 33, 70), rand(gen, 70, 19)
    mm = einc.torch.op(MATMUL, {"input0": {"dtype": "float32", "shape": [33, 70]},
                                "input1": {"dtype": "float32", "shape": [70, 19]}})  # fmt: skip
    assert mm.name.startswith("einc::output0_") and callable(mm)
    y = mm(a, b)
    assert isinstance(y, torch.Tensor) and y.device.type == "cpu"
    close(y, a @ b, rtol=1e-5)
    close(y.double(), a.double() @ b.double(), rtol=1e-5)  # and the float64 reference
    # the registered op is the same thing under its torch name
    close(getattr(torch.ops.einc, mm.opname)(a, b), y, rtol=0, atol=0)


def test_torchs_opcheck_passes(gen: torch.Generator) -> None:
    """torch.library.opcheck: the schema, the fake kernel against the real one (static and
    dynamic shapes through AOTAutograd: the fake's shapes from the axis relations), and the
    autograd registration; at the example's shapes and at others (kernels compiled on call)."""
    a, b = rand(gen, 8, 6), rand(gen, 6, 5)
    mm = einc.torch.op(MATMUL, [a, b])
    for args in [(a, b), (rand(gen, 3, 7), rand(gen, 7, 2))]:
        report = torch.library.opcheck(mm.op, args)
        assert set(report.values()) == {"SUCCESS"}, report
    assert set(mm.kernels) == {((8, 6), (6, 5)), ((3, 7), (7, 2))}


def test_elementwise_op_from_example_tensors_matches_torch(gen: torch.Generator) -> None:
    x, bias = rand(gen, 16, 40, dtype=torch.float64), rand(gen, 40, dtype=torch.float64)
    ew = einc.torch.op("output0[N, C] = (input0[N, C] * 2.0 - input1[C]).call(`exp`)", [x, bias], name="scale_exp")
    assert ew.opname.startswith("scale_exp_")
    assert [(s.name, s.dtype, s.shape) for s in ew.inputs] == [("input0", torch.float64, (16, 40)),
                                                               ("input1", torch.float64, (40,))]  # fmt: skip
    close(ew(x, bias), torch.exp(x * 2.0 - bias), rtol=1e-12, atol=0)


def test_reductions_match_torch(gen: torch.Generator) -> None:
    x = rand(gen, 24, 300)
    row_max = einc.torch.op("output0[N] >=! input0[N, K]", {"input0": x})
    close(row_max(x), x.amax(dim=1), rtol=0, atol=0)
    counts = torch.randint(-1000, 1000, (8, 50), generator=gen, dtype=torch.int32)
    total = einc.torch.op("output0[N] +=! data[N, K]", {"data": counts})
    close(total(counts), counts.sum(dim=1, dtype=torch.int32), rtol=0, atol=0)


def test_two_outputs_come_back_as_a_tuple_in_the_kernels_order(gen: torch.Generator) -> None:
    x = rand(gen, 12, 64)
    softmax = einc.torch.op(
        "row_max[N] >=! input0[N, C]; "
        "row_sum[N] +=! (input0[N, C] - row_max[N]).call(`exp`); "
        "output0[N, C] = (input0[N, C] - row_max[N]).call(`exp`) / row_sum[N]",
        {"input0": x}, extra_outputs=["row_max"],
    )  # fmt: skip
    assert [s.name for s in softmax.outputs] == ["row_max", "output0"]
    result = softmax(x)
    assert isinstance(result, tuple) and len(result) == 2
    close(result[0], x.amax(dim=1), rtol=0, atol=0)
    close(result[1], torch.softmax(x, dim=1), rtol=1e-5)


def test_a_program_text_with_declarations_and_non_contiguous_inputs(gen: torch.Generator) -> None:
    mnist = (ROOT / "examples" / "mnist.ein").read_text()
    net = einc.torch.op(mnist, None, filename="examples/mnist.ein")
    assert [s.name for s in net.inputs][:2] == ["data", "weight_0"]
    args = [rand(gen, *s.shape) * 0.1 for s in net.inputs]
    args[1] = rand(gen, 512, 784).t() * 0.05  # a transposed view: copied, not refused
    assert not args[1].is_contiguous()
    data, w0, w1, w2, b0, b1, b2 = args
    want = torch.relu(torch.relu(data @ w0 + b0) @ w1 + b1) @ w2 + b2
    close(net(*args), want, rtol=1e-4, atol=1e-4)
    # declared shapes are the program's: none varies, and another batch is a located error
    assert net.dynamic == ()
    with pytest.raises(RuntimeInputError, match=r"argument 0 \('data'\) has shape \[8, 784\], the op was made for "
                       r"\[64, 784\]: its dimension 0, axis N, is 64 \('data' is declared float32\[64, 784\]") as info:
        net(data[:8], *args[1:])
    assert info.value.render().startswith("examples/mnist.ein:2:")  # the declaration


def test_the_same_program_is_the_same_op_whatever_its_example_shapes(gen: torch.Generator) -> None:
    """The name digests the program's tokens, dtypes and the sizes that cannot vary: another
    example shape is the same op (a loader of an exported program need not know the shapes),
    another dtype, fixed shapes (dynamic=False) or another `dynamic` is another."""
    spec = {"input0": {"dtype": "float32", "shape": [8, 8]}, "input1": {"dtype": "float32", "shape": [8, 8]}}
    one, two = einc.torch.op(MATMUL, spec), einc.torch.op(MATMUL + "  # a comment", spec)
    assert one.name == two.name
    other = einc.torch.op(MATMUL, {**spec, "input1": {"dtype": "float32", "shape": [8, 4]}})
    named = einc.torch.op(MATMUL, spec, name="mm")
    assert other.name == one.name and named.name == "einc::mm_" + one.opname.split("_")[-1]
    fixed = einc.torch.op(MATMUL, spec, dynamic=False)
    fixed_other = einc.torch.op(MATMUL, {**spec, "input1": {"dtype": "float32", "shape": [8, 4]}}, dynamic=False)
    batch = einc.torch.op(MATMUL, spec, dynamic=["N"])
    doubles = einc.torch.op(MATMUL, {k: {**v, "dtype": "float64"} for k, v in spec.items()})
    assert len({one.name, fixed.name, fixed_other.name, batch.name, doubles.name}) == 5
    assert (one.dynamic, fixed.dynamic, batch.dynamic) == (("K", "M", "N"), (), ("N",))
    a, b = rand(gen, 8, 8), rand(gen, 8, 8)
    close(one(a, b), two(a, b), rtol=0, atol=0)
    close(named(a, b), a @ b, rtol=1e-5)
    a, b = rand(gen, 5, 3), rand(gen, 3, 9)
    close(one(a, b), a @ b, rtol=1e-5)  # any shapes the program takes
    with pytest.raises(RuntimeInputError, match=r"argument 0 \('input0'\) has shape \[5, 3\], the op was made for "
                       r"\[8, 8\]: its dimension 0, axis N, is 8 \(the op was made with dynamic=False\)"):
        fixed(a, b)


# ---- the MLP of examples/mnist.ein as three einc ops -----------------------------------------
LAYER = "hidden[N, M] +=! x[N, K] * w[K, M]; y[N, M] = (hidden[N, M] + b[M]).call(`max`, [0.0])"
LAST = "hidden[N, M] +=! x[N, K] * w[K, M]; y[N, M] = hidden[N, M] + b[M]"
SIZES = [(784, 512), (512, 512), (512, 10)]
BATCH = 64


class TorchMLP(torch.nn.Module):
    def __init__(self, gen: torch.Generator):
        super().__init__()
        self.weights = torch.nn.ParameterList([rand(gen, k, m) * (1 / k) for k, m in SIZES])
        self.biases = torch.nn.ParameterList([rand(gen, m) * 0.1 - 0.1 for _, m in SIZES])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = x @ w + b
            if i < len(SIZES) - 1:
                x = torch.relu(x)
        return x


class EincMLP(torch.nn.Module):
    """The same parameters; each layer one einc op (matmul, bias, ReLU in one kernel)."""

    def __init__(self, reference: TorchMLP):
        super().__init__()
        self.weights, self.biases = reference.weights, reference.biases
        self.layers = [
            einc.torch.op(LAYER if i < len(SIZES) - 1 else LAST,
                          {"x": {"dtype": "float32", "shape": [BATCH, k]}, "w": {"dtype": "float32", "shape": [k, m]},
                           "b": {"dtype": "float32", "shape": [m]}}, name=f"mnist_layer{i}")  # fmt: skip
            for i, (k, m) in enumerate(SIZES)
        ]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer, w, b in zip(self.layers, self.weights, self.biases):
            out = layer(x, w, b)
            assert isinstance(out, torch.Tensor)
            x = out
        return x


LAST_BATCH = 17
"""An epoch of 145 samples in batches of 64: two full batches, then a partial one of 17."""


@pytest.fixture(scope="module")
def mlps() -> tuple[TorchMLP, EincMLP, torch.Tensor]:
    """The models and a full batch, made once for the module (each new batch size compiles
    three kernels, once: the tests share them)."""
    gen = torch.Generator().manual_seed(7)
    reference = TorchMLP(gen)
    return reference, EincMLP(reference), rand(gen, BATCH, 784)


def batches(x: torch.Tensor) -> list[torch.Tensor]:
    """An epoch: the full batch, the same again scaled, and the last, partial batch."""
    return [x, x * 0.5, x[:LAST_BATCH] * 1.5]


def test_mlp_eager_matches_the_torch_module(mlps: tuple[TorchMLP, EincMLP, torch.Tensor]) -> None:
    reference, model, x = mlps
    with torch.no_grad():
        for batch in batches(x):
            close(model(batch), reference(batch), rtol=1e-4, atol=1e-5)
        want64 = copy.deepcopy(reference).double()(x.double()).float()  # the float64 reference
    close(model(x).detach(), want64, rtol=1e-4, atol=1e-5)  # parameters requiring grad: forward works
    # the partial batch compiled one more kernel per layer, for its shapes, once
    for layer, (k, m) in zip(model.layers, SIZES):
        assert {((BATCH, k), (k, m), (m,)), ((LAST_BATCH, k), (k, m), (m,))} <= set(layer.kernels)
        assert layer.dynamic == ("K", "M", "N")


def test_mlp_under_torch_compile_is_one_graph_and_takes_every_batch(
    mlps: tuple[TorchMLP, EincMLP, torch.Tensor],
) -> None:
    """fullgraph: no graph break around the einc ops. A second batch size makes Dynamo mark
    the batch dynamic (the fake kernels' output shapes are the input's SymInt); a third size
    runs that graph without recompiling, its kernels compiled on their first call."""
    from torch._dynamo.utils import counters

    reference, model, x = mlps
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        for batch in [*batches(x), x[:30]]:
            close(compiled(batch), reference(batch), rtol=1e-4, atol=1e-5)
    assert counters["stats"]["unique_graphs"] == 2, dict(counters["stats"])  # static, then dynamic batch
    assert all(((30, k), (k, m), (m,)) in layer.kernels for layer, (k, m) in zip(model.layers, SIZES))
    # with parameters requiring grad, AOTAutograd traces the backward too: the forward runs ...
    y = compiled(x[:LAST_BATCH])
    with torch.no_grad():
        close(y.detach(), reference(x[:LAST_BATCH]), rtol=1e-4, atol=1e-5)
    # ... and backward through it is the clear error, not a silent zero gradient
    with pytest.raises(UsageError, match="has no derivative"):
        y.sum().backward()


def test_mlp_in_torch_export_with_a_dynamic_batch(mlps: tuple[TorchMLP, EincMLP, torch.Tensor], tmp_path: Path) -> None:
    from torch.export import Dim

    reference, model, x = mlps
    program = torch.export.export(model, (x,), dynamic_shapes={"x": {0: Dim("batch")}})
    called = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert [c.split(".")[0] for c in called] == ["einc"] * 3, called
    out = next(n for n in program.graph.nodes if n.op == "output").args[0][0]
    assert isinstance(out.meta["val"].shape[0], torch.SymInt)  # the output's batch is the input's
    # saved and loaded again (the loading process must have made the same ops: same names)
    torch.export.save(program, tmp_path / "mlp.pt2")
    loaded = torch.export.load(tmp_path / "mlp.pt2")
    with torch.no_grad():
        for batch in batches(x):
            want = reference(batch)
            close(program.module()(batch), want, rtol=1e-4, atol=1e-5)
            close(loaded.module()(batch), want, rtol=1e-4, atol=1e-5)


# ---- mistakes ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mm() -> einc.torch.EincOp:
    return einc.torch.op(MATMUL, {"input0": {"dtype": "float32", "shape": [4, 6]},
                                  "input1": {"dtype": "float32", "shape": [6, 5]}})  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (lambda: (torch.ones(4, 6, dtype=torch.float64), torch.ones(6, 5)), r"argument 0 \('input0'\) has dtype torch.float64, the op was made for torch.float32"),
        (lambda: (torch.ones(4, 6), torch.ones(6, 5, 1)), r"argument 1 \('input1'\) has shape \[6, 5, 1\], 3 dimensions; the op takes float32\[K, M\], 2"),
        (lambda: (torch.ones(4, 6),), r"takes 2 tensors \(input0: float32\[N, K\], input1: float32\[K, M\]\), got 1"),
        (lambda: (torch.ones(4, 6), torch.ones(6, 5, device="meta")), r"argument 1 \('input1'\) is on meta, but the op runs on cpu tensors"),
    ],
)  # fmt: skip
def test_wrong_tensors_are_clear_errors(mm: einc.torch.EincOp, args, message: str) -> None:
    with pytest.raises(RuntimeInputError, match=message):
        mm(*args())


INCONSISTENT = (
    r"einc::output0_\w+: argument 1 \('input1'\) has shape \[5, 4\]: its dimension 0 is axis K, which is 6 in "
    r"argument 0 \('input0', its dimension 1\); the program needs them equal"
)


def test_shapes_the_program_cannot_take_are_located_errors(mm: einc.torch.EincOp) -> None:
    """Sizes the program ties together must agree: the error points at the index in the
    program (and, in a note, at the one the axis took its extent from), nothing compiles."""
    before = set(mm.kernels)
    with pytest.raises(RuntimeInputError, match=INCONSISTENT) as info:
        mm(torch.ones(4, 6), torch.ones(5, 4))
    text = info.value.render()
    assert text.startswith("<string>:1:41: error:"), text  # input1[K, M]'s K
    assert "<string>:1:29: note: axis K takes its extent from dimension 1 of 'input0' here" in text
    assert set(mm.kernels) == before
    # a size the relations allow but an index does not: the frontend's located error, as the caller's
    shifted = einc.torch.op("output0[N] = input0[N] + input1[N + 1]", [torch.ones(4), torch.ones(5)])
    with pytest.raises(RuntimeInputError, match=r"cannot take inputs of these shapes \(input0: \[5\], input1: \[5\]\)"):
        shifted(torch.ones(5), torch.ones(5))
    close(shifted(torch.ones(5), torch.ones(6)), torch.full((5,), 2.0), rtol=0, atol=0)


def test_wrong_tensors_under_torch_compile_are_the_ops_error(mm: einc.torch.EincOp) -> None:
    """torch.compile runs the frame eagerly where the op refuses its tensors, so the error is
    the op's own, located; with fullgraph=True Dynamo cannot, and says so; the registered op
    called directly fails in its fake kernel with the same words."""
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: mm(a, b) * 2)
    close(f(torch.ones(4, 6), torch.ones(6, 5)), torch.full((4, 5), 12.0), rtol=0, atol=0)
    with pytest.raises(RuntimeInputError, match=INCONSISTENT):
        f(torch.ones(4, 6), torch.ones(5, 4))
    close(f(torch.ones(3, 2), torch.ones(2, 7)), torch.full((3, 7), 4.0), rtol=0, atol=0)  # new shapes: fine
    strict = torch.compile(lambda a, b: mm(a, b) * 2, fullgraph=True)
    with pytest.raises(Exception, match="an einc op does not take its input tensors"):
        strict(torch.ones(4, 6), torch.ones(5, 4))
    direct = torch.compile(lambda a, b: mm.op(a, b) * 2, fullgraph=True)
    with pytest.raises(Exception, match=INCONSISTENT):
        direct(torch.ones(4, 6), torch.ones(5, 4))


def test_only_the_declared_axes_vary(gen: torch.Generator) -> None:
    """dynamic=["N"]: the batch varies (eager and in torch.export with a Dim), K and M are the
    example's; an axis the program lacks is a located usage error."""
    from torch.export import Dim

    a, b = rand(gen, 8, 6), rand(gen, 6, 5)
    batch = einc.torch.op(MATMUL, [a, b], dynamic=["N"])
    assert repr(batch).startswith(f"<einc op {batch.name} (input0: float32[N, 6], input1: float32[6, 5])")
    close(batch(a[:3], b), a[:3] @ b, rtol=1e-5)
    with pytest.raises(RuntimeInputError, match=r"its dimension 1, axis K, is 6 \(axis 'K' is not in the op's dynamic=\['N'\]\)"):
        batch(rand(gen, 8, 7), rand(gen, 7, 5))

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return torch.relu(batch(x, w))

    program = torch.export.export(Model(), (a, b), dynamic_shapes={"x": {0: Dim("n")}, "w": None})
    x = rand(gen, 11, 6)
    close(program.module()(x, b), torch.relu(x @ b), rtol=1e-5)
    with pytest.raises(UsageError, match=r"dynamic names 'Q', which is no axis indexing an input dimension .*\(those are K, M, N\)"):
        einc.torch.op(MATMUL, [a, b], dynamic=["Q"])
    with pytest.raises(UsageError, match="dynamic is True, False or a list of axis names"):
        einc.torch.op(MATMUL, [a, b], dynamic="N")


def test_backward_through_an_einc_op_is_a_clear_error(mm: einc.torch.EincOp) -> None:
    a = torch.ones(4, 6, requires_grad=True)
    y = mm(a, torch.ones(6, 5))
    assert isinstance(y, torch.Tensor) and y.requires_grad
    with pytest.raises(UsageError, match=r"einc::output0_\w+ has no derivative: .*torch.no_grad\(\)"):
        y.sum().backward()
    assert a.grad is None


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: einc.torch.op(MATMUL, [torch.ones(2, 2, dtype=torch.complex64)] * 2), UsageError,
         "the example tensor 'input0' is torch.complex64, which einc has no dtype for"),
        (lambda: einc.torch.op(MATMUL, [torch.ones(2, 2, device="meta")] * 2), UsageError,
         "the example tensor 'input0' is on meta, but target 'c' runs on cpu tensors"),
        (lambda: einc.torch.op(MATMUL, [torch.ones(2, 2)] * 2, name="no good"), UsageError,
         "an op name is an identifier"),
        (lambda: einc.torch.op(MATMUL, [torch.ones(2, 2)] * 2, target="fortran"), TargetError, "fortran"),
        (lambda: einc.torch.op(MATMUL, [torch.ones(2, 3), torch.ones(2, 3)]), SemanticError, "K"),
        (lambda: einc.torch.op(MATMUL, 42), UsageError, "input_dict is einc.compile's mapping"),
        (lambda: einc.torch.op(MATMUL, [torch.ones(2, 2)] * 2).tune(trials=0), UsageError, "trials must be"),
        (lambda: einc.torch.op(MATMUL, [torch.ones(2, 2)] * 2, schedule="default").tune(trials=1), UsageError,
         "made with a schedule"),
    ],
)  # fmt: skip
def test_bad_ops_are_located_einc_errors(make, error: type[EincError], message: str) -> None:
    with pytest.raises(error, match=message) as info:
        make()
    assert info.value.render().startswith("<string>:"), info.value.render()


def test_einc_torch_is_reachable_from_einc() -> None:
    script = "import sys, einc\nassert 'torch' not in sys.modules\nprint(einc.torch.op.__module__)"
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "einc.torch.maker", done.stderr


# ---- tuning ----------------------------------------------------------------------------------
def test_tune_records_the_best_and_later_ops_use_it(tmp_path: Path, gen: torch.Generator) -> None:
    db = tmp_path / "tuning.db"
    spec = {"input0": {"dtype": "float32", "shape": [64, 96]}, "input1": {"dtype": "float32", "shape": [96, 80]}}
    made = einc.torch.op(MATMUL, spec, db=db)
    assert made.record is None  # no database yet: the default schedule
    result = made.tune(trials=3, workers=1, threads=1, seed=5)
    assert result.best is not None and result.best.ok
    with RecordDB(db) as records:
        task = TuneTask(MATMUL, "c", input_dict=spec)
        best = records.best(task.key, "c", record_context(get_target("c")))
        assert best is not None and len(records.trials(task.key, "c", record_context(get_target("c")))) >= 3
    # the op was compiled again with the best record, and computes the same numbers
    assert made.record is not None and made.record.id == best.id
    assert made.kernel.source != einc.compile(MATMUL, spec, use_records=False).source or best.sketch == "default"
    a, b = rand(gen, 64, 96), rand(gen, 96, 80)
    close(made(a, b), a @ b, rtol=1e-5)
    # a new process making the same op (the database from $EINC_TUNING_DB) uses the record too
    script = (
        "import torch, einc.torch\n"
        f"op = einc.torch.op({MATMUL!r}, {spec!r})\n"
        "a, b = torch.ones(64, 96), torch.ones(96, 80)\n"
        "assert bool((op(a, b) == 96).all())\n"
        "print(op.name, op.record.id if op.record else None)\n"
    )
    env = {**os.environ, "EINC_TUNING_DB": str(db), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [made.name, str(best.id)]
    assert "using tuning record" not in done.stderr or str(best.id) in done.stderr
    # records are per shape: the last, partial batch has none until it is tuned itself
    a17 = rand(gen, 17, 96)
    close(made(a17, b), a17 @ b, rtol=1e-5)
    partial = ((17, 96), (96, 80))
    assert made.kernels[partial].record is None
    tuned = made.tune(trials=2, inputs=(a17, b), workers=1, threads=1, seed=5)
    assert tuned.best is not None and tuned.best.ok
    record = made.kernels[partial].record
    assert record is not None and record.id != best.id
    assert made.record is not None and made.record.id == best.id  # the full batch keeps its own
    with RecordDB(db) as records:
        task17 = TuneTask(MATMUL, "c", input_dict={**spec, "input0": {"dtype": "float32", "shape": [17, 96]}})
        best17 = records.best(task17.key, "c", record_context(get_target("c")))
        assert best17 is not None and best17.id == record.id
    close(made(a17, b), a17 @ b, rtol=1e-5)
    with pytest.raises(RuntimeInputError, match="axis K"):
        made.tune(trials=1, inputs=(a17, rand(gen, 95, 80)))


# ---- GPUs (run only where torch sees one; never required in CI) -------------------------------
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA/ROCm device visible to torch")
def test_gpu_tensors_with_the_gpu_target(gen: torch.Generator) -> None:
    target = "hip" if torch.version.hip else "cuda"
    a, b = rand(gen, 64, 32).cuda(), rand(gen, 32, 48).cuda()
    mm = einc.torch.op(MATMUL, [a, b], target)
    y = mm(a, b)
    assert isinstance(y, torch.Tensor) and y.device == a.device
    close(y, a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(RuntimeInputError, match="is on cpu, but the op runs on cuda tensors"):
        mm(a.cpu(), b.cpu())
    f = torch.compile(lambda x, y: mm(x, y) + 1, fullgraph=True)
    close(f(a, b), a @ b + 1, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: the test above runs instead")
@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_a_gpu_target_without_a_gpu_is_a_clear_error(target: str) -> None:
    """Where the target cannot run, making the op is a located error (today) or, once the
    kernel can be compiled without a driver, calling it on CPU tensors is."""
    spec = {"input0": {"dtype": "float32", "shape": [4, 3]}, "input1": {"dtype": "float32", "shape": [3, 2]}}
    try:
        gpu_op = einc.torch.op(MATMUL, spec, target)
    except EincError as err:
        assert ("NVIDIA" if target == "cuda" else "HIP") in err.message
        return
    with pytest.raises(RuntimeInputError, match=r"is on cpu, but the op runs on cuda tensors"):
        gpu_op(torch.ones(4, 3), torch.ones(3, 2))
