"""The CPU operator benchmark's table (benchmarks/cpu_operators.py) at tiny shapes of the same
programs: each operator's einc kernel (default C schedule) against its NumPy float64
reference on random inputs, the references against PyTorch (the benchmark's other side),
and the Markdown table of a saved run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from einc.semantics.compare import max_error, tolerance
from tests.modules import load_module

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


bench = load_module(BENCHMARKS / "cpu_operators.py")
KEYS = list(bench.ops(1, tiny=True))


def _inputs(op, seed: int) -> dict[str, np.ndarray]:  # noqa: ANN001
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for name, v in op.inputs.items()}


def test_the_table_has_every_family() -> None:
    assert {"conv1d", "conv2d", "conv2d_pad", "conv2d_stride", "conv2d_dilated", "conv2d_grouped", "depthwise",
            "conv2d_transposed", "conv2d_1x1", "conv2d_7x7", "conv3d", "bmm_qk", "matmul_small", "softmax",
            "layernorm", "reduce_pool", "reduce_tokens"} <= set(KEYS)  # fmt: skip
    full, tiny = bench.ops(16), bench.ops(16, tiny=True)
    assert list(full) == list(tiny)
    for key in KEYS:  # the tiny program has the real one's structure: the same text but sizes
        strip = lambda s: "".join(c for c in s if not c.isdigit())  # noqa: E731
        assert strip(full[key].ir) == strip(tiny[key].ir), key


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("key", KEYS)
def test_einc_default_matches_the_numpy_reference(key: str, batch: int) -> None:
    op = bench.ops(batch, tiny=True)[key]
    arrays = _inputs(op, 26 + batch)
    want = op.numpy({name: a.astype(np.float64) for name, a in arrays.items()})
    got = bench.task_of(op).compilation(None).kernel()(**arrays)["output0"]
    assert got.shape == want.shape and max_error(got, want) <= tolerance("float32"), key


@pytest.mark.parametrize("key", KEYS)
def test_the_numpy_reference_is_what_torch_computes(key: str) -> None:
    torch = pytest.importorskip("torch")
    op = bench.ops(2, tiny=True)[key]
    arrays = _inputs(op, 7)
    want = op.numpy({name: a.astype(np.float64) for name, a in arrays.items()})
    tensors = {name: torch.from_numpy(a) for name, a in arrays.items()}
    for layout, x in bench._layouts(torch, op, tensors).items():  # pyright: ignore[reportPrivateUsage]
        assert max_error(np.asarray(op.torch(torch, x)), want) <= tolerance("float32"), (key, layout)


def test_markdown_of_merged_runs(tmp_path: Path) -> None:
    machine = {"cpu": "cpu", "threads": 2, "torch": "2", "repeat": 5, "fma_peak_gflops": 100.0, "triad_gbs": 10.0,
               "trials": None}  # fmt: skip
    row = {"key": "conv2d", "name": "conv", "batch": 1, "flops": 2e9, "bytes": 1e7, "torch_s": 0.04, "default_s": 0.08}
    norm = {"key": "softmax", "name": "softmax", "batch": 1, "flops": 0.0, "bytes": 1e8, "torch_s": 0.01,
            "default_s": 0.02}  # fmt: skip
    (tmp_path / "a.json").write_text(json.dumps({"machine": machine, "rows": [row, norm]}))
    tuned = {"machine": {**machine, "trials": 32}, "rows": [{**row, "tuned_s": 0.02}]}
    (tmp_path / "b.json").write_text(json.dumps(tuned))
    text = bench.markdown(bench.merge([str(tmp_path / "a.json"), str(tmp_path / "b.json")]))
    assert "tuned: 32 trials" in text
    lines = text.splitlines()
    conv = next(line for line in lines if line.startswith("| conv "))
    cells = [c.strip() for c in conv.strip("|").split("|")]
    # peak, torch ms, default ms, GFLOP/s, einc/torch, of peak, of triad, tuned ms, einc/torch, of peak, of triad
    assert cells[2:] == ["100", "40.000", "80.000", "25.0", "0.50", "0.25", "0.01", "20.000", "2.00", "1.00", "0.05"]
    soft = next(line for line in lines if line.startswith("| softmax "))
    assert [c.strip() for c in soft.strip("|").split("|")][5:9] == ["-", "0.50", "-", "0.50"]
    means = next(line for line in lines if "geometric mean" in line)
    assert "| 0.50 " in means and "| 2.00 " in means


def test_a_rows_own_peak_divides_its_rates() -> None:
    """Since the peak is timed beside each operator, a row's `fma_peak_gflops` (not the run's,
    taken at its start) is what its fractions of the peak divide by, and the machine line says so."""
    machine = {"cpu": "cpu", "threads": 1, "torch": "2", "repeat": 5, "fma_peak_gflops": 100.0, "triad_gbs": 10.0,
               "trials": None, "peak_beside": True}  # fmt: skip
    row = {"key": "conv2d", "name": "conv", "batch": 1, "flops": 2e9, "bytes": 1e7, "torch_s": 0.04, "default_s": 0.08,
           "fma_peak_gflops": 50.0}  # fmt: skip
    text = bench.markdown({"machine": machine, "rows": [row]})
    conv = next(line for line in text.splitlines() if line.startswith("| conv "))
    cells = [c.strip() for c in conv.strip("|").split("|")]
    assert cells[2] == "50" and cells[6:8] == ["0.50", "0.50"]  # 25 GFLOP/s of 50
    assert "each row's: timed beside it" in text


SKETCHED = ["conv2d_stride", "conv2d_grouped", "conv2d_transposed", "conv3d", "matmul_small"]


@pytest.mark.parametrize("key", SKETCHED)
def test_new_sketches_and_a_random_point_match_the_reference(key: str) -> None:
    """The CPU sketches new with the operator benchmark (the weight packed, the second outer
    tile parallel) on the convolution families the old space did not tile (strided,
    grouped, transposed) or tiled at batch 1 on one core (3-D), and a matmul with a small K,
    at tiny shapes and batch 1: their default points and a random point of the space
    against the NumPy reference; a point the schedule interpreter refuses must be refused
    with a located error. (Random points of random programs: test_tune_space.py.)"""
    from einc.errors import ScheduleError
    from einc.schedule.script import Schedule
    from einc.tune.space import SearchSpace

    op = bench.ops(1, tiny=True)[key]
    task = bench.task_of(op)
    space = SearchSpace.from_task(task)
    assert {"tile", "tile.cw", "tile.cw.pw", "tile.cw.p1"} <= set(space.sketches), (key, space.skipped)
    arrays = _inputs(op, 1)
    want = op.numpy({name: a.astype(np.float64) for name, a in arrays.items()})
    points = [space.sketch_default("tile.cw.pw"), space.sketch_default("tile.cw.p1"),
              space.random_point(np.random.default_rng(26))]  # fmt: skip
    for point in points:
        try:
            got = task.compilation(Schedule.parse(space.candidate(point).schedule)).kernel()(**arrays)["output0"]
        except ScheduleError as e:
            assert point.sketch != "default" and str(e).startswith("<schedule>:"), (key, point, e)
            continue
        assert max_error(got, want) <= tolerance("float32"), (key, point.describe())


def test_tuning_records_are_kept_and_their_decision_read_back(tmp_path: Path) -> None:
    """`--records PATH` keeps the tuner's records; `--from-records PATH` reads the decision
    (and the trials) back without tuning: the schedule the tuner decided (None: the default
    kept), on this machine and search-space version."""
    op = bench.ops(1, tiny=True)["matmul_small"]
    db = tmp_path / "tuned.db"
    decided, _, info = bench.tune_op(op, 2, 1, 1, records=str(db))
    assert db.exists() and info["trials"] == 2
    found = bench.recorded_op(op, str(db))
    assert found is not None
    again, _, summary = found
    assert again == decided and summary["crowned"] == info["crowned"] and summary["trials"] >= 1
    assert bench.recorded_op(bench.ops(1, tiny=True)["softmax"], str(db)) is None  # never tuned: no decision
    with pytest.raises(SystemExit):
        bench.main(["--from-records", str(tmp_path / "missing.db")])
    with pytest.raises(SystemExit):
        bench.main(["--from-records", str(db), "--tune", "all"])


def test_a_sketch_is_timed_beside_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    """`--sketch NAME` (run_op's `sketch`): the default point of that sketch of the operator's
    search space is checked against the reference and timed with the default (`sketch_s`);
    a sketch the space lacks is said so and left out."""
    pytest.importorskip("torch")
    op = bench.ops(1, tiny=True)["conv2d"]
    row = bench.run_op("conv2d", op, 1, 1, 1, sketch="tile.cw")
    assert row["sketch_s"] > 0 and row["default_s"] > 0 and "sketch" in row["errors"]
    row = bench.run_op("conv2d", op, 1, 1, 1, sketch="policy.none")
    assert "sketch_s" not in row and "no sketch 'policy.none'" in capsys.readouterr().err
