"""`einc.torch.op`: one line of Antares IR becomes a PyTorch custom operator.

    mm = einc.torch.op("output0[N, M] +=! input0[N, K] * input1[K, M]", {"input0": a, "input1": b})
    y = mm(a, b)                        # torch.ops.einc.output0_<digest>(a, b)

Each op is defined in the `einc` namespace of `torch.library` (schema `(Tensor input0, ...) ->
Tensor` or a tuple of tensors), with

- the kernel for the CPU and CUDA dispatch keys: the inputs are checked (count, dtype, shape,
  device), made contiguous, the outputs allocated with `torch.empty` and written by the einc
  kernel (`tensors.launch`);
- a fake (meta) kernel: the outputs' shapes and dtypes come from the compiled program, nothing
  runs, so `torch.compile` and `torch.export` trace the op as one opaque node;
- an autograd formula whose backward raises: einc computes the forward only, and a gradient
  through an einc op is an error at `backward()`, never a silent zero (the forward works on
  tensors that require grad, eager and compiled).

The op's name is `einc::{name}_{digest}`, the digest of the normalised program (its `ein`
module: names, shapes, dtypes, statements), the target, the schedule and the C flags: making the
same op again in a process (or in a new one) gives the same name, and the new compile (which may
use a newer tuning record) replaces the kernel the registered op runs.
"""

from __future__ import annotations

import hashlib
import keyword
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from einc.compiler.driver import Compilation
from einc.compiler.kernel import Kernel
from einc.errors import SourceLocation, UsageError
from einc.torch.tensors import TensorSpec, check_inputs, device_type, example_input_dict, is_examples, launch

if TYPE_CHECKING:
    from einc.schedule.script import Schedule
    from einc.compiler.records import Record
    from einc.tune.tuner import TuneResult

NAMESPACE = "einc"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class _Entry:
    """What a registered op runs: replaced when the op is made again (a new compile)."""

    kernel: Kernel
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    device: str


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
    args = ", ".join(f"Tensor {_arg_name(s.name)}" for s in entry.inputs)
    results = "Tensor" if len(entry.outputs) == 1 else "(" + ", ".join("Tensor" for _ in entry.outputs) + ")"
    lib.define(f"{opname}({args}) -> {results}")

    def run(*tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        e = _entries[opname]
        check_inputs(qualname, e.inputs, tensors, e.device)
        inputs = [t.contiguous() for t in tensors]
        device = inputs[0].device if inputs else torch.device(e.device)
        outputs = [torch.empty(s.shape, dtype=s.dtype, device=device) for s in e.outputs]
        launch(e.kernel, inputs, outputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def fake(*tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        e = _entries[opname]
        check_inputs(qualname, e.inputs, tensors, e.device)
        outputs = [
            tensors[0].new_empty(s.shape, dtype=s.dtype) if tensors else torch.empty(s.shape, dtype=s.dtype, device="meta")
            for s in e.outputs
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
        self._name = name
        self._build()

    def _build(self) -> None:
        comp = Compilation(self._source, self._filename, self._input_dict, self._extra_outputs, self.target,
                           self._schedule, cflags=self._cflags, use_records=self._use_records, db=self._db)  # fmt: skip
        kernel = comp.kernel()
        schedule = self._schedule
        given = "" if schedule is None else schedule if isinstance(schedule, str) else (schedule.source or str(schedule))
        digest = hashlib.sha256(
            "\0".join([str(comp.module("ein")), self.target, given, *self._cflags]).encode()
        ).hexdigest()[:12]
        self.opname = f"{self._name or kernel.outputs[-1].name}_{digest}"
        entry = _Entry(kernel, tuple(TensorSpec.of(i) for i in kernel.inputs),
                       tuple(TensorSpec.of(o) for o in kernel.outputs), device_type(self.target))  # fmt: skip
        self.op = _register(self.opname, entry)
        """The registered overload, `torch.ops.einc.<opname>.default`."""
        self._entry = entry

    @property
    def name(self) -> str:
        """The qualified name, `einc::<opname>`."""
        return f"{NAMESPACE}::{self.opname}"

    @property
    def kernel(self) -> Kernel:
        """The einc kernel the op runs (its `.source`, `.record`, ...)."""
        return self._entry.kernel

    @property
    def record(self) -> Record | None:
        """The tuning record the kernel was compiled with, if any."""
        return self._entry.kernel.record

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._entry.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._entry.outputs

    def __call__(self, *tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        if len(tensors) != len(self.inputs) or not all(isinstance(t, torch.Tensor) for t in tensors):
            check_inputs(self.name, self.inputs, tensors, self._entry.device)  # says what is wrong
        return self.op(*tensors)

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.describe()}" for s in self.inputs)
        outs = ", ".join(f"{s.name}: {s.describe()}" for s in self.outputs)
        return f"<einc op {self.name} ({ins}) -> ({outs}) on {self.target}>"

    def tune(
        self,
        trials: int = 32,
        *,
        db: str | Path | None = None,
        time_budget_s: float | None = None,
        workers: int | None = None,
        threads: int | None = None,
        policy: str = "bayes",
        seed: int = 0,
        progress: bool = False,
    ) -> TuneResult:
        """Tune the op's program on its target with einc's tuner (`einc.tune.tuner.tune`),
        every trial recorded in `db` (default: the op's database, else `$EINC_TUNING_DB`, else
        ~/.cache/einc/tuning.db), then compile it again: this op and every op made later of
        the same program, target and device (in this process or another) run the best record."""
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
        input_dict = None if self._input_dict is None else cast(Mapping[str, Mapping[str, object]], dict(self._input_dict))
        task = TuneTask(self._source, self.target, self._filename, input_dict, self._extra_outputs)
        with RecordDB(path) as records:
            result = tune(task, trials=trials, time_budget_s=time_budget_s, workers=workers, threads=threads,
                          policy=policy, seed=seed, progress=progress, db=records)  # fmt: skip
        self._db = path
        self._build()
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
) -> EincOp:
    """A PyTorch custom op computing the Antares IR `ir` (or a `.ein` program text).

    `input_dict`: as in `einc.compile` (`{"input0": {"dtype": "float32", "shape": [64, 32]}}`),
    or example tensors: a mapping of input names to tensors, or a sequence of tensors named
    input0, input1, ... (the op is made for their dtypes and shapes; they must be on the
    target's device). `target`: "c" (and the other CPU-executed targets: opencl, sycl, hlsl,
    poplar) for CPU tensors, "cuda" / "hip" for GPU tensors. `name`: the op's name before its
    digest (default: the program's last output). `schedule`, `extra_outputs`, `cflags`,
    `use_records`, `db`: as in `einc.compile` (without a schedule the best tuning record is used).

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
    return EincOp(ir, filename, spec, extra_outputs, target, schedule, cflags, use_records, db, name)
