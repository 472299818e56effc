"""`einc.torch.op`: one line of Antares IR becomes a PyTorch custom operator.

    mm = einc.torch.op("output0[N, M] +=! input0[N, K] * input1[K, M]", {"input0": a, "input1": b})
    y = mm(a, b)                        # torch.ops.einc.output0_<digest>(a, b)

Each op is defined in the `einc` namespace of `torch.library` (schema `(Tensor input0, ...) ->
Tensor` or a tuple of tensors), with

- the kernel for the CPU and CUDA dispatch keys: the inputs are checked (count, dtype, rank,
  device, and their sizes against the program's shape relations), made contiguous, the outputs
  allocated with `torch.empty` and written by the einc kernel (`tensors.launch`) compiled for
  their shapes: einc compiles for fixed shapes, so the op keeps one kernel per shape signature,
  compiled the first time it is called with it (the example's at once), as Antares' CustomOp
  and tinygrad's JIT do: the last, partial batch of an epoch just works;
- a fake (meta) kernel: the outputs' shapes come from the inputs' through the program's axis
  relations (einc.frontend.dims), so they are the inputs' SymInts under `torch.compile` with
  dynamic shapes and `torch.export` with a `Dim`, and each equality the program needs is a
  `torch._check`; nothing compiles or runs, so both trace the op as one opaque node;
- an autograd formula whose backward raises: einc computes the forward only, and a gradient
  through an einc op is an error at `backward()`, never a silent zero (the forward works on
  tensors that require grad, eager and compiled).

Which dimensions may vary is the op's `dynamic` (default: every one the program lets vary; a
declared input's shape and a `where` range never do). The op's name is
`einc::{name}_{digest}`, the digest of the program's tokens (whitespace and comments aside), the
inputs' dtypes and the sizes that cannot vary, the outputs, the target, the schedule and the C
flags: making the same op again in a process (or in a new one, e.g. to load an exported
program) gives the same name, whatever example shapes it is made from, and the new op (which
may use newer tuning records) replaces what the registered op runs.
"""

from __future__ import annotations

import hashlib
import keyword
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, cast

import torch

from einc.compiler.driver import Compilation
from einc.compiler.kernel import Kernel
from einc.errors import RuntimeInputError, SemanticError, SourceLocation, UsageError
from einc.torch.shapes import OpShapes
from einc.torch.tensors import TensorSpec, check_inputs, device_type, example_input_dict, is_examples, launch

if TYPE_CHECKING:
    from einc.schedule.script import Schedule
    from einc.compiler.records import Record
    from einc.tune.tuner import TuneResult

NAMESPACE = "einc"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


Signature = tuple[tuple[int, ...], ...]
"""The inputs' shapes: what one compiled kernel of an op is for."""


@dataclass
class _Entry:
    """What a registered op runs: one kernel per shape signature, compiled by `build` the first
    time the op is called with it; replaced when the op is made again."""

    shapes: OpShapes
    device: str
    build: Callable[[Signature], Kernel]
    example: Signature
    """The shapes the op was made for (compiled when it was made)."""
    kernels: dict[Signature, Kernel]
    lock: threading.Lock = field(default_factory=threading.Lock)

    def kernel(self, signature: Signature) -> Kernel:
        """The kernel for inputs of these shapes (checked against the program's relations):
        compiled now if it was not."""
        kernel = self.kernels.get(signature)
        if kernel is not None:
            return kernel
        problem = self.shapes.problem(signature)
        if problem is not None:
            raise problem
        with self.lock:  # two threads with a new shape compile it once
            kernel = self.kernels.get(signature)
            if kernel is None:
                kernel = self.kernels[signature] = self.build(signature)
        return kernel


_library: torch.library.Library | None = None
_entries: dict[str, _Entry] = {}
"""The ops this process registered, by name in the namespace."""
_lock = threading.Lock()
"""Held while an op is defined (two threads making the same op define it once)."""


def _lib() -> torch.library.Library:
    """The process's `einc` fragment library (kept alive: dropping it unregisters the ops),
    with `einc::no_derivative`, the backward of every einc op."""
    global _library
    if _library is None:
        lib = torch.library.Library(NAMESPACE, "FRAGMENT")
        lib.define("no_derivative(Tensor grad, SymInt[] shape, ScalarType dtype, str op) -> Tensor")

        def no_derivative(grad: torch.Tensor, shape: list[int], dtype: torch.dtype, op: str) -> torch.Tensor:
            raise UsageError(
                f"{op} has no derivative: einc ops compute the forward only. Run it under "
                "torch.no_grad() (or on tensors that do not require grad), or keep it out of the "
                "graph that backward() differentiates"
            )

        def no_derivative_fake(grad: torch.Tensor, shape: list[int], dtype: torch.dtype, op: str) -> torch.Tensor:
            return grad.new_empty(shape, dtype=dtype)

        for key in ("CPU", "CUDA"):
            lib.impl("no_derivative", no_derivative, key)
        torch.library.register_fake(f"{NAMESPACE}::no_derivative", no_derivative_fake, lib=lib)
        _library = lib
    return _library


def _arg_name(name: str) -> str:
    """A schema argument name for an input: the program's, unless the schema or Python
    reserves it."""
    return f"{name}_" if keyword.iskeyword(name) or name in ("self", "out") else name


def _register(opname: str, entry: _Entry) -> torch._ops.OpOverload:
    """Define `einc::opname` (once per process) and make it run `entry`."""
    with _lock:
        known = opname in _entries
        _entries[opname] = entry
        if not known:
            try:
                _define(opname)
            except BaseException:
                del _entries[opname]
                raise
    return getattr(getattr(torch.ops, NAMESPACE), opname).default


def _define(opname: str) -> None:
    """Define `einc::opname` with the schema of `_entries[opname]`, its CPU and CUDA kernels
    (which run whatever `_entries[opname]` holds at the call), its fake kernel and its
    autograd formula."""
    qualname = f"{NAMESPACE}::{opname}"
    entry = _entries[opname]
    lib = _lib()
    args = ", ".join(f"Tensor {_arg_name(s.name)}" for s in entry.shapes.inputs)
    outs = entry.shapes.outputs
    results = "Tensor" if len(outs) == 1 else "(" + ", ".join("Tensor" for _ in outs) + ")"
    lib.define(f"{opname}({args}) -> {results}")

    def run(*tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        e = _entries[opname]
        check_inputs(qualname, e.shapes.inputs, tensors, e.device, e.shapes.describe)
        kernel = e.kernel(tuple(tuple(t.shape) for t in tensors))
        inputs = [t.contiguous() for t in tensors]
        device = inputs[0].device if inputs else torch.device(e.device)
        specs = [TensorSpec.of(o) for o in kernel.outputs]
        outputs = [torch.empty(s.shape, dtype=s.dtype, device=device) for s in specs]
        launch(kernel, inputs, outputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def fake(*tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        e = _entries[opname]
        check_inputs(qualname, e.shapes.inputs, tensors, e.device, e.shapes.describe)
        shapes = e.shapes.output_shapes([t.shape for t in tensors])
        outputs = [
            tensors[0].new_empty(shape, dtype=s.dtype) if tensors else torch.empty(shape, dtype=s.dtype, device="meta")
            for s, shape in zip(e.shapes.outputs, shapes)
        ]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def setup_context(ctx: torch.autograd.function.FunctionCtx, inputs: tuple[torch.Tensor, ...], output: object) -> None:
        setattr(ctx, "like", [(list(t.shape), t.dtype) for t in inputs])

    def backward(ctx: torch.autograd.function.FunctionCtx, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        like: list[tuple[list[int], torch.dtype]] = getattr(ctx, "like")
        grad = next((g for g in grads if g is not None), None)
        no_derivative = getattr(torch.ops, NAMESPACE).no_derivative
        return tuple(
            no_derivative(grad, shape, dtype, qualname) if grad is not None and dtype.is_floating_point else None
            for shape, dtype in like
        )

    for key in ("CPU", "CUDA"):
        lib.impl(opname, run, key)
    torch.library.register_fake(qualname, fake, lib=lib)
    torch.library.register_autograd(qualname, backward, setup_context=setup_context, lib=lib)


class EincOp:
    """A registered einc op: call it with tensors in the program's input order; one output
    comes back as a tensor, several as a tuple (in the kernel's output order)."""

    def __init__(
        self, source: str, filename: str, input_dict: Mapping[str, Mapping[str, object]] | None,
        extra_outputs: Sequence[str] | None, target: str, schedule: Schedule | str | None,
        cflags: Sequence[str], use_records: bool, db: str | Path | None, name: str | None,
        dynamic: bool | Sequence[str] = True,
    ):  # fmt: skip
        self.target = target
        self._source, self._filename, self._input_dict = source, filename, input_dict
        self._extra_outputs = None if extra_outputs is None else tuple(
            [extra_outputs] if isinstance(extra_outputs, str) else extra_outputs
        )
        self._schedule, self._cflags, self._use_records, self._db = schedule, tuple(cflags), use_records, db
        loc = SourceLocation(filename, 1, 1)
        if name is not None and (not isinstance(name, str) or NAME.fullmatch(name) is None):
            raise UsageError(f"an op name is an identifier (letters, digits, _), not {name!r}", loc)
        if isinstance(dynamic, str) or not (
            isinstance(dynamic, bool) or (isinstance(dynamic, Sequence) and all(isinstance(a, str) for a in dynamic))
        ):  # fmt: skip
            raise UsageError(f"dynamic is True, False or a list of axis names, not {dynamic!r}", loc)
        self._dynamic = dynamic if isinstance(dynamic, bool) else tuple(dynamic)
        self._name = name
        self._build()

    def _compilation(self, input_dict: Mapping[str, Mapping[str, object]] | None) -> Compilation:
        return Compilation(self._source, self._filename, input_dict, self._extra_outputs, self.target,
                           self._schedule, cflags=self._cflags, use_records=self._use_records, db=self._db)  # fmt: skip

    def _build(self) -> None:
        from einc.frontend.dims import shape_relations

        comp = self._compilation(self._input_dict)
        kernel = comp.kernel()
        inputs = tuple(TensorSpec.of(i) for i in kernel.inputs)
        outputs = tuple(TensorSpec.of(o) for o in kernel.outputs)
        assert [s.name for s in inputs] == [t.name for t in comp.program.inputs], (inputs, comp.program.inputs)
        shapes = OpShapes("", shape_relations(comp.program), inputs, outputs, self._dynamic)
        schedule = self._schedule
        given = "" if schedule is None else schedule if isinstance(schedule, str) else (schedule.source or str(schedule))
        digest = hashlib.sha256("\0".join([
            _tokens(self._source, self._filename), shapes.signature(), ", ".join(s.name for s in outputs),
            self.target, given, *self._cflags,
        ]).encode()).hexdigest()[:12]  # fmt: skip
        self.opname = f"{self._name or kernel.outputs[-1].name}_{digest}"
        shapes.qualname = self.name
        example = tuple(s.shape for s in inputs)
        entry = _Entry(shapes, device_type(self.target), self._compile, example, {example: kernel})
        self.op = _register(self.opname, entry)
        """The registered overload, `torch.ops.einc.<opname>.default`."""
        self._entry = entry

    def _input_dict_for(self, signature: Signature) -> dict[str, Mapping[str, object]] | None:
        """The op's input_dict with the shapes of `signature` (inputs declared in the program
        keep theirs: they cannot vary)."""
        if self._input_dict is None:
            return None
        position = {s.name: k for k, s in enumerate(self.inputs)}
        return {
            name: {**spec, "shape": list(signature[position[name]])} if name in position else spec
            for name, spec in self._input_dict.items()
        }

    def _compile(self, signature: Signature) -> Kernel:
        """The kernel for inputs of these shapes (that fit the program's relations); a shape
        the frontend still refuses (an index out of range) is the caller's RuntimeInputError."""
        try:
            return self._compilation(self._input_dict_for(signature)).kernel()
        except SemanticError as err:
            shapes = ", ".join(f"{s.name}: {list(shape)}" for s, shape in zip(self.inputs, signature))
            raise RuntimeInputError(f"{self.name}: the program cannot take inputs of these shapes ({shapes}): "
                                    f"{err.message}", err.loc, err.notes) from None  # fmt: skip

    @property
    def name(self) -> str:
        """The qualified name, `einc::<opname>`."""
        return f"{NAMESPACE}::{self.opname}"

    @property
    def kernel(self) -> Kernel:
        """The einc kernel for the shapes the op was made for (its `.source`, `.record`, ...)."""
        return self._entry.kernels[self._entry.example]

    @property
    def kernels(self) -> dict[Signature, Kernel]:
        """The kernels compiled so far, by the inputs' shapes."""
        with self._entry.lock:
            return dict(self._entry.kernels)

    @property
    def record(self) -> Record | None:
        """The tuning record the kernel for the shapes the op was made for was compiled with, if any."""
        return self.kernel.record

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        """The inputs, with the shapes the op was made for."""
        return self._entry.shapes.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        """The outputs, with their shapes for the inputs' the op was made for."""
        return self._entry.shapes.outputs

    @property
    def dynamic(self) -> tuple[str, ...]:
        """The axes whose extents may vary from call to call (`*`: a dimension no axis indexes)."""
        return self._entry.shapes.dynamic

    def __call__(self, *tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        if not self._entry.shapes.accepts(tensors):  # plain comparisons: guards under Dynamo
            _refuse(self, tensors)
        return self.op(*tensors)

    def __repr__(self) -> str:
        shapes = self._entry.shapes
        outs = ", ".join(f"{s.name}: {s.describe()}" for s in self.outputs)
        return f"<einc op {self.name} ({shapes.signature()}) -> ({outs}) on {self.target}>"

    def tune(
        self,
        trials: int = 32,
        *,
        inputs: Sequence[torch.Tensor] | None = None,
        db: str | Path | None = None,
        time_budget_s: float | None = None,
        workers: int | None = None,
        threads: int | None = None,
        policy: str = "bayes",
        seed: int = 0,
        progress: bool = False,
    ) -> TuneResult:
        """Tune the op's program on its target with einc's tuner (`einc.tune.tuner.tune`) for
        one shape signature: the shapes the op was made for, or those of `inputs` (tensors the
        op takes), every trial recorded in `db` (default: the op's database, else
        `$EINC_TUNING_DB`, else ~/.cache/einc/tuning.db), then compile the kernel for those
        shapes again: this op and every op made later of the same program, target and device
        (in this process or another) run the best record for them. Records are per shape:
        the kernels for other shapes keep theirs (tune each shape that matters)."""
        from einc.tune.command import POLICIES
        from einc.tune.records import RecordDB
        from einc.compiler.records import default_db_path
        from einc.tune.tuner import tune
        from einc.tune.types import TuneTask

        loc = SourceLocation(self._filename, 1, 1)
        if self._schedule is not None or not self._use_records:
            raise UsageError(
                f"{self.name} was made with " + ("a schedule" if self._schedule is not None else "use_records=False")
                + ", so it would not use what tuning finds; make it without one to tune it", loc,
            )  # fmt: skip
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise UsageError(f"trials must be an integer of at least 1, not {trials!r}", loc)
        if policy not in POLICIES:
            raise UsageError(f"policy is one of {', '.join(POLICIES)}, not {policy!r}", loc)
        path = Path(db) if db is not None else Path(self._db) if self._db is not None else default_db_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UsageError(f"cannot create the tuning database's folder: {err.strerror or err}", SourceLocation(str(path), 1, 1)) from None
        signature = self._entry.example
        if inputs is not None:
            tensors = tuple(inputs)
            if not self._entry.shapes.accepts(tensors):
                _refuse(self, tensors)
            signature = tuple(tuple(int(d) for d in t.shape) for t in tensors)
        input_dict = self._input_dict_for(signature)
        task = TuneTask(self._source, self.target, self._filename, input_dict, self._extra_outputs)
        with RecordDB(path) as records:
            result = tune(task, trials=trials, time_budget_s=time_budget_s, workers=workers, threads=threads,
                          policy=policy, seed=seed, progress=progress, db=records)  # fmt: skip
        self._db = path
        kernel = self._compile(signature)
        with self._entry.lock:
            self._entry.kernels[signature] = kernel
        registered = _entries.get(self.opname)
        if registered is not None and registered is not self._entry:  # the same op, made again since
            with registered.lock:
                registered.kernels[signature] = kernel
        return result


def op(
    ir: str,
    input_dict: Mapping[str, object] | Sequence[torch.Tensor] | None = None,
    target: str = "c",
    *,
    name: str | None = None,
    schedule: Schedule | str | None = None,
    extra_outputs: Sequence[str] | None = None,
    filename: str = "<string>",
    cflags: Sequence[str] = (),
    use_records: bool = True,
    db: str | Path | None = None,
    dynamic: bool | Sequence[str] = True,
) -> EincOp:
    """A PyTorch custom op computing the Antares IR `ir` (or a `.ein` program text).

    `input_dict`: as in `einc.compile` (`{"input0": {"dtype": "float32", "shape": [64, 32]}}`),
    or example tensors: a mapping of input names to tensors, or a sequence of tensors named
    input0, input1, ... (the op is made for their dtypes and shapes; they must be on the
    target's device). `target`: "c" (and the other CPU-executed targets: opencl, sycl, hlsl,
    poplar) for CPU tensors, "cuda" / "hip" for GPU tensors. `name`: the op's name before its
    digest (default: the program's last output). `schedule`, `extra_outputs`, `cflags`,
    `use_records`, `db`: as in `einc.compile` (without a schedule the best tuning record is used).

    Shapes: the op is compiled for the example's shapes at once, and for other shapes the first
    time it is called with them (one kernel per shape signature, each with its own tuning
    record; a given schedule applies to each). `dynamic`: which dimensions may differ from the
    example's: True (every one the program lets vary: a declared input's shape and a `where`
    range never do), False (none), or the names of the axes that may (`["N"]`: the batch of
    `output0[N, M] +=! input0[N, K] * input1[K, M]`). Dimensions the program ties together
    (both K above) must agree, else a RuntimeInputError located at the index in the program.

    Every user mistake is an `einc.EincError`: a bad program or option when the op is made, a
    `RuntimeInputError` for tensors that do not match it when it is called."""
    loc = SourceLocation(filename, 1, 1)
    if isinstance(target, str):
        from einc.compiler.driver import resolve_target

        resolve_target(target, loc)  # an unknown target before the tensors are looked at
    if input_dict is not None and is_examples(input_dict):
        spec = example_input_dict(cast("Mapping[str, object] | Sequence[torch.Tensor]", input_dict), target, loc)
    elif isinstance(input_dict, Mapping) or input_dict is None:
        spec = cast("Mapping[str, Mapping[str, object]] | None", input_dict)
    else:
        raise UsageError(
            "input_dict is einc.compile's mapping of input names to {'dtype', 'shape'}, a mapping of "
            f"input names to example tensors, or a sequence of example tensors; not {type(input_dict).__name__}",
            loc,
        )
    return EincOp(ir, filename, spec, extra_outputs, target, schedule, cflags, use_records, db, name, dynamic)


@torch.compiler.disable(
    reason="an einc op does not take its input tensors (their count, dtypes, ranks, or sizes the program "
    "cannot take); its own error, located in the program, says why: call it eagerly, or compile without "
    "fullgraph=True (the frame then runs eagerly and raises it)"
)
def _refuse(op: EincOp, tensors: Sequence[torch.Tensor]) -> NoReturn:
    """Raise the error for tensors `op` does not take (located in the program where a size is
    the problem). Never traced: under `torch.compile` the frame runs eagerly here and raises
    the op's own error, not Dynamo's."""
    shapes = op._entry.shapes
    check_inputs(op.name, shapes.inputs, tensors, op._entry.device, shapes.describe)
    problem = shapes.problem([t.shape for t in tensors])
    if problem is not None:
        raise problem
    raise RuntimeInputError(f"{op.name} does not take these tensors ({shapes.signature()})")


def _tokens(source: str, filename: str) -> str:
    """The program's tokens, one space apart: its text without whitespace and comments (what
    the op's name digests, so reformatting a program keeps the op)."""
    from einc.frontend.diagnostics import SourceText
    from einc.frontend.lexer import Kind, Lexer

    lexer = Lexer(SourceText(source, filename))
    tokens = []
    while (token := lexer.token(len(tokens))).kind != Kind.EOF:
        tokens.append(token)
    return " ".join(t.text for t in tokens)
