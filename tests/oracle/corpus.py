"""One program x schedule x target case, checked against the oracle and replayable from a file.

A `Case` holds what a failure needs to be reproduced without the generator that drew it: the
program's text (`input_dict`, `extra_outputs`), the schedule's text (None: the target's
default; "none": the loops as lowered), the target, the seed, the inputs and the oracle's
float64 expectation (tests/oracle/compare.py `Expected`) -- or, for a case that must be
refused, the error class, a message pattern and where it is located.

`check_case` compiles, runs and compares. A refusal (a located ScheduleError / TargetError /
SemanticError) is returned, not raised, for the random suites to assume away; a refusal
without a place (`einc: error: ...`) fails. With EINC_CORPUS_PENDING set (scripts/explore.py), every failing case
is written there as `<signature>.json` (the last one of a signature wins: Hypothesis replays
the shrunk example last) and every outcome is counted in EINC_EXPLORE_STATS.
tests/regressions/*.json are such files, run by tests/test_regressions.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from einc.compiler.driver import Compilation
from einc.errors import EincError, ScheduleError, SemanticError, TargetError
from tests.oracle.compare import Expected, check_output

REFUSALS = (ScheduleError, TargetError, SemanticError)
"""The errors that refuse a schedule or a program (a user's mistake); ToolchainError is not
among them: a target compiler rejecting generated code is einc's bug."""

REFUSED_BY_DESIGN = re.compile(
    r"cannot store (int64|float64|float16|int16|int8|bool) buffers|of float64 is not supported|no type for [if]64"
)
"""A target refusing a dtype (as tests/test_device_differential.py REFUSED_BY_DESIGN)."""


class Unlocated(AssertionError):
    """A refusal without a location (rendered `einc: error: ...`)."""




@dataclass
class Case:
    program: str
    input_dict: dict[str, Any] | None
    extra_outputs: list[str] | None
    schedule: str | None
    target: str
    seed: int = 0
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    expected: dict[str, Expected] = field(default_factory=dict)
    refusal: dict[str, str] | None = None  # {"error": class, "message": regex, "at": "file:line:col"}
    origin: str = ""

    # -- files --
    def to_json(self) -> dict[str, Any]:
        def arr(a: np.ndarray) -> dict[str, Any]:
            return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.ravel().tolist()}

        def exp(e: Expected) -> dict[str, Any]:
            return {"dtype": e.dtype, "value": arr(np.asarray(e.value)),
                    "err": None if e.err is None else arr(np.broadcast_to(e.err, e.value.shape)),
                    "uncertain": None if e.uncertain is None
                    else arr(np.broadcast_to(e.uncertain, e.value.shape))}  # fmt: skip

        out: dict[str, Any] = {
            "origin": self.origin, "targets": [self.target], "seed": self.seed,
            "program": self.program, "input_dict": self.input_dict,
            "extra_outputs": self.extra_outputs, "schedule": self.schedule,
        }  # fmt: skip
        if self.refusal is not None:
            out["refusal"] = self.refusal
        else:
            out["inputs"] = {k: arr(np.asarray(v)) for k, v in self.inputs.items()}
            out["expected"] = {k: exp(v) for k, v in self.expected.items()}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], target: str) -> Case:
        def arr(d: dict[str, Any] | None) -> Any:
            if d is None:
                return None
            return np.asarray(d["data"], dtype=d["dtype"]).reshape(d["shape"])

        expected = {
            k: Expected(v["dtype"], arr(v["value"]), arr(v["err"]), arr(v["uncertain"]))
            for k, v in data.get("expected", {}).items()
        }  # fmt: skip
        return cls(data["program"], data["input_dict"], data["extra_outputs"], data["schedule"], target,
                   data.get("seed", 0), {k: arr(v) for k, v in data.get("inputs", {}).items()},
                   expected, data.get("refusal"), data.get("origin", ""))  # fmt: skip

    def reproducer(self) -> str:
        return (f"target {self.target}, seed {self.seed}\n  program: {self.program!r}\n"
                f"  input_dict: {self.input_dict}\n  extra_outputs: {self.extra_outputs}\n"
                f"  schedule:\n{self.schedule}")  # fmt: skip


def located(err: EincError) -> None:
    """Fails on a refusal without a location."""
    if err.loc is None:
        raise Unlocated(f"refusal without a location: {err.render()}")


def compile_case(case: Case) -> Compilation:
    comp = Compilation(case.program, "<program>", case.input_dict, case.extra_outputs, case.target,
                       None if case.schedule is None else _schedule(case.schedule))  # fmt: skip
    comp.run_until("source")
    return comp


def _schedule(text: str) -> Any:
    if text == "none":
        return "none"
    from einc.schedule.script import Schedule

    return Schedule.parse(text, "<schedule>")


def run_case(case: Case, comp: Compilation) -> dict[str, np.ndarray]:
    inputs = {k: v.copy() for k, v in case.inputs.items()}
    if case.target == "c":
        return comp.kernel()(**inputs)
    from tests.test_device_differential import run_on_device

    return run_on_device(comp, inputs)


def check_case(case: Case) -> EincError | None:
    """Compile `case`, run it, compare with its expectation (see the module docstring).
    Returns the refusal when the case is refused (and was not expected to be)."""
    try:
        outcome = _check(case)
    except BaseException as err:
        wrong = isinstance(err, AssertionError) and not isinstance(err, Unlocated)
        _count("wrong" if wrong else "internal")
        record_failure(case, err)
        raise
    _count("refused" if outcome is not None else "ok")
    return outcome


def _check(case: Case) -> EincError | None:
    try:
        comp = compile_case(case)
    except REFUSALS as err:
        located(err)
        if case.refusal is not None:
            _check_refusal(case, err)
            return None
        return err
    if case.refusal is not None:
        raise AssertionError(f"expected {case.refusal['error']} ({case.refusal['message']}), but it compiled")
    outputs = run_case(case, comp)
    assert sorted(outputs) == sorted(case.expected), f"results {sorted(outputs)}, expected {sorted(case.expected)}"
    for name, exp in case.expected.items():
        check_output(name, outputs[name], exp, f"{case.target}, seed {case.seed}")
    return None


def _check_refusal(case: Case, err: EincError) -> None:
    want = case.refusal or {}
    assert type(err).__name__ == want["error"], f"{type(err).__name__}: {err.message}, expected {want['error']}"
    assert re.search(want["message"], err.message), f"{err.message!r} does not match {want['message']!r}"
    if want.get("at"):
        assert str(err.loc) == want["at"], f"located at {err.loc}, expected {want['at']}"


# ---- exploration: signatures, pending entries, counts -------------------------------------------


def shape_of(message: str) -> str:
    """A message's shape: its first line, names and numbers replaced (one line per defect)."""
    first = next((ln for ln in str(message).splitlines() if ln.strip()), "")
    first = re.sub(r"^\S+:\d+:\d+: error: ", "", first)
    first = re.sub(r"/\S+", "PATH", first)
    first = re.sub(r"'[^']*'|\"[^\"]*\"", "S", first)
    first = re.sub(r"\[[^\]]*\]", "[..]", first)
    first = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", first)
    return re.sub(r"\b(output|temp|input)N\b", "T", first)[:160]


def signature(case: Case, err: BaseException) -> str:
    return f"{type(err).__name__}: {shape_of(str(err))} [{case.target}]"


def record_failure(case: Case, err: BaseException) -> Path | None:
    """With EINC_CORPUS_PENDING set, write `case` there as a corpus entry of its signature."""
    pending = os.environ.get("EINC_CORPUS_PENDING")
    if not pending:
        return None
    sig = signature(case, err)
    data = case.to_json()
    data["failure"] = {"signature": sig, "error": type(err).__name__, "message": str(err)[:2000]}
    digest = hashlib.sha256(sig.encode()).hexdigest()[:12]
    path = Path(pending) / f"{digest}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def _count(outcome: str) -> None:
    stats = os.environ.get("EINC_EXPLORE_STATS")
    if stats:
        with open(stats, "a") as f:
            f.write(outcome + "\n")


def genprog_case(prog: Any, target: str, schedule: str | None, seed: int, origin: str = "") -> Case:
    """A case of a generated program (tests/oracle/genprog.py): inputs drawn from `seed`,
    the oracle's expectation of them."""
    text, input_dict, extra = prog.compile_args()
    inputs = prog.make_inputs(np.random.default_rng(seed))
    return Case(text, input_dict, extra, schedule, target, seed, inputs, prog.evaluate(inputs), origin=origin)
