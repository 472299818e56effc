"""`einc tune --model DEVICE`: candidates ranked by the performance model where the device is
absent (einc.tune.modelled), their numbers checked by the egpu interpreter, records made under
the modelled context and used by a compile for that device only where no measured one applies."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from einc.cli import main
from einc.compiler.records import MODEL_ENV, RecordStore, find_record, model_context, record_context
from einc.perfmodel import get_device
from einc.perfmodel.devices import device_for
from einc.schedule.choice import ScheduleChoice
from einc.targets import get_target
from einc.tune.modelled import model_candidate
from einc.tune.space import SearchSpace
from einc.tune.tuner import tune
from einc.tune.types import Status, TuneTask

SOURCE = """input input0: float32[32, 64]
input input1: float32[64, 48]
output0[N, M] +=! input0[N, K] * input1[K, M]
"""


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory):
    """One modelled search of a small CUDA matmul (no GPU is needed), its database."""
    db = tmp_path_factory.mktemp("model") / "tuning.db"
    task = TuneTask(SOURCE, "cuda", "mm.ein")
    result = tune(task, trials=6, workers=2, db=db, model="h100", seed=3)
    return task, result, db


def test_every_candidate_is_modelled_and_checked_by_the_interpreter(tuned) -> None:
    task, result, _ = tuned
    assert result.trials == 6 and result.decision is not None
    assert result.modelled == "h100"
    oks = [t.result for t in result.history if t.result.ok]
    assert oks, [t.result.reason for t in result.history]
    for m in oks:
        assert m.extra["modelled"] == "h100" and m.extra["numbers"] == "interpreter", m.extra
        assert m.extra["bound"] in ("compute", "issue", "memory", "on-chip", "launch")
        assert len(m.times) == 1 and m.times[0] > 0
    text = result.summary()
    assert "ranked by the performance model of h100" in text and "(modelled)" in text
    assert "final rounds" not in text  # a model has no noise: no rounds


def test_the_decision_is_recorded_under_the_modelled_context(tuned, monkeypatch: pytest.MonkeyPatch) -> None:
    task, result, db = tuned
    monkeypatch.delenv(MODEL_ENV, raising=False)
    target = get_target("cuda")
    with RecordStore(db, create=False) as store:
        best = store.best(task.key, "cuda", model_context(target, get_device("h100")))
        measured = store.best(task.key, "cuda", record_context(target))
    assert best is not None and best.modelled and best.is_decision
    assert measured is None
    assert best.device == "model: NVIDIA H100 SXM5 80GB"
    assert "modelled for NVIDIA H100" in best.describe()
    assert best.schedule == result.best.candidate.schedule
    # a compile for the H100 uses it; one for another device, or none named, does not
    found = find_record(task.normalized, target, db, model="h100")
    assert found is not None and found[0].id == best.id
    assert find_record(task.normalized, target, db, model="a100") is None
    assert find_record(task.normalized, target, db) is None
    monkeypatch.setenv(MODEL_ENV, "h100")
    assert find_record(task.normalized, target, db) is not None


def test_compile_with_model_uses_the_modelled_record(tuned, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    _, _, db = tuned
    monkeypatch.delenv(MODEL_ENV, raising=False)
    program = tmp_path / "mm.ein"
    program.write_text(SOURCE)
    assert main(["compile", str(program), "-t", "cuda", "--db", str(db), "--model", "h100", "-o", str(tmp_path / "k.cu")]) == 0
    assert "modelled for NVIDIA H100 SXM5 80GB" in capsys.readouterr().err


def test_a_candidate_with_wrong_numbers_is_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    task = TuneTask(SOURCE, "opencl", "mm.ein")
    space = SearchSpace.from_task(task)
    candidate = space.candidate(space.default_point())
    device = get_device("a770")
    built = model_candidate(task, candidate, device)
    assert built.status is Status.OK and built.artifact.checked == "interpreter", built.reason
    from einc.tune import modelled

    data = modelled._task_data(task)
    wrong = dataclasses.replace(data, reference={k: v + 1.0 for k, v in data.reference.items()})
    monkeypatch.setattr(modelled, "_task_data", lambda t: wrong)
    built = model_candidate(task, candidate, device)
    assert built.status is Status.WRONG and "max error" in built.reason


def test_a_candidate_the_device_cannot_run_is_refused(tmp_path: Path) -> None:
    small = dataclasses.asdict(get_device("a100"))
    small.update(name="tiny", threads_per_block=16, key="")
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({k: v for k, v in small.items() if k not in ("key",)}))
    task = TuneTask(SOURCE, "cuda", "mm.ein")
    comp = task.compilation(ScheduleChoice.DEFAULT)
    assert comp.module("target") is not None
    space = SearchSpace.from_task(task)
    built = model_candidate(task, space.candidate(space.default_point()), get_device(str(path)))
    assert built.status is Status.REFUSED and "does not run on tiny" in built.reason and "threads per block" in built.reason


def test_device_names_map_to_the_models_devices() -> None:
    assert device_for("NVIDIA H100 80GB HBM3") == "h100"
    assert device_for("NVIDIA A100-SXM4-40GB") == "a100"
    assert device_for("NVIDIA GeForce RTX 4090") == "rtx4090"
    assert device_for("AMD Instinct MI250X") == "mi250x"
    assert device_for("OpenCL: pthread-skylake-avx512-AMD EPYC") is None


@pytest.mark.parametrize("argv, message", [
    (["-t", "c", "--model", "h100"], "--model ranks device kernels"),
    (["-t", "cuda", "--model", "h200x"], "unknown device 'h200x'"),
    (["-t", "cuda", "--model", "h100", "--runner", "dask-local"], "--model needs no device"),
])  # fmt: skip
def test_model_misuse_is_a_located_error(argv: list[str], message: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    program = tmp_path / "mm.ein"
    program.write_text(SOURCE)
    assert main(["tune", str(program), "--db", str(tmp_path / "t.db"), "--trials", "2", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and "error:" in err and "Traceback" not in err


def test_a_program_of_several_kernels_is_tuned_by_the_model_task_by_task(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Also the whole-program comparison on a device target, whose default mapping is made by
    the pipeline, not by a schedule script (its candidate was once an empty, unparsable one)."""
    program = tmp_path / "two.ein"
    program.write_text("input input0: float32[32, 64]\ninput input1: float32[64, 48]\n"
                       "t0[N, M] +=! input0[N, K] * input1[K, M]\noutput0[N, M] = t0[N, M].call(`exp`)\n")  # fmt: skip
    db = tmp_path / "t.db"
    assert main(["tune", str(program), "-t", "cuda", "--model", "h100", "--trials", "6", "--workers", "1",
                 "--db", str(db), "--quiet"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "whole program (2 kernels): default schedule" in out and "refused" not in out, out
    assert main(["records", "list", "--db", str(db)]) == 0
    listing = capsys.readouterr().out
    rows = [line for line in listing.splitlines() if " cuda " in line]
    assert len(rows) == 2 and all("model: NVIDIA H100" in r for r in rows), listing


def test_an_antares_task_with_an_input_dict_is_modelled() -> None:
    """A task given as Antares IR with `input_dict` (the service's form) holds dicts: its data
    are cached by its identity, not by the task (an unhashable key once made every build fail)."""
    task = TuneTask("output0[N, M] +=! input0[N, K] * input1[K, M]", "opencl", "<ir>",
                    {"input0": {"dtype": "float32", "shape": [16, 32]}, "input1": {"dtype": "float32", "shape": [32, 8]}})  # fmt: skip
    space = SearchSpace.from_task(task)
    built = model_candidate(task, space.candidate(space.default_point()), get_device("a770"))
    assert built.status is Status.OK and built.artifact.checked == "interpreter", built.reason
