"""Kernels called from several threads at once, on every target that runs here (C, OpenCL,
HLSL, SYCL, Poplar; CUDA where an NVIDIA GPU is), and the first use of each runtime from
several threads of a fresh process.

- Concurrent calls: one shared kernel, THREADS threads started together, each call with
  its own inputs (distinct per thread and call), every result compared exactly with its
  own float64 reference (`a + b` of float32 values rounded once is exact), while
  `sys.setswitchinterval(1e-6)` makes the interpreter switch threads as often as it can.
- OpenCL's argument race (arguments set by one thread, enqueued by another) is also
  widened on purpose: a pause between `set_args` and the enqueue makes every unlocked
  launch take another thread's buffers, so that test fails reliably without the lock.
- First use: FRESH_PROCESSES fresh processes, in each THREADS threads that load and call
  the same kernel of each target at once (device, context and program set-up race; the C
  and HLSL builds race on an empty build cache).

Counts keep the file under ~30 s on two busy cores; EINC_STRESS_CALLS (calls per thread)
and EINC_STRESS_PROCESSES raise them for exploration.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import einc
from einc.compiler.driver import Compilation
from einc.targets import toolchains
from tests.test_device_targets import require, require_run

THREADS = 4
CALLS = int(os.environ.get("EINC_STRESS_CALLS", "12"))
FRESH_PROCESSES = int(os.environ.get("EINC_STRESS_PROCESSES", "2"))
LENGTH = 1000
IR = "output0[N] = input0[N] + input1[N]"
INPUTS = {"input0": {"dtype": "float32", "shape": [LENGTH]}, "input1": {"dtype": "float32", "shape": [LENGTH]}}
TARGETS = ("c", "opencl", "hlsl", "sycl", "poplar")
ROOT = Path(__file__).resolve().parent.parent

Runner = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], object]



def inputs_for(thread: int, call: int) -> dict[str, np.ndarray]:
    """Random non-zero inputs, different for every (thread, call), so that a result
    computed from another call's buffers cannot match."""
    rng = np.random.default_rng([thread, call])
    shift = np.float32(1 + thread * 1000 + call)
    return {
        "input0": (rng.uniform(0.5, 2.0, LENGTH) * rng.choice([-1, 1], LENGTH)).astype(np.float32) + shift,
        "input1": rng.uniform(0.5, 2.0, LENGTH).astype(np.float32),
    }


def expected(inputs: Mapping[str, np.ndarray]) -> np.ndarray:
    return (inputs["input0"].astype(np.float64) + inputs["input1"].astype(np.float64)).astype(np.float32)


def poisoned() -> dict[str, np.ndarray]:
    return {"output0": np.full(LENGTH, np.nan, np.float32)}


def mismatch(thread: int, call: int, got: np.ndarray, inputs: Mapping[str, np.ndarray]) -> str | None:
    want = expected(inputs)
    if np.array_equal(got, want):
        return None
    wrong = np.flatnonzero(got != want)
    worst = float(np.nanmax(np.abs(got.astype(np.float64) - want))) if np.isfinite(got).any() else float("nan")
    return f"thread {thread} call {call}: {wrong.size} of {LENGTH} elements wrong (largest error {worst:.3g})"


@contextmanager
def forced_switching() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def hammer(run: Runner, threads: int = THREADS, calls: int = CALLS) -> list[str]:
    """Call `run(inputs, outputs)` from `threads` threads started together, `calls` times
    each; every failure or wrong result, described."""
    barrier = threading.Barrier(threads)
    failures: list[str] = []

    def work(thread: int) -> None:
        try:
            barrier.wait()
            for call in range(calls):
                inputs, outputs = inputs_for(thread, call), poisoned()
                run(inputs, outputs)
                problem = mismatch(thread, call, outputs["output0"], inputs)
                if problem:
                    failures.append(problem)
        except Exception as error:  # noqa: BLE001 - every thread's failure is reported
            failures.append(f"thread {thread}: {type(error).__name__}: {error}")

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    with forced_switching():
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    return failures


# --- concurrent calls of one shared kernel --------------------------------------------


@pytest.mark.parametrize("target", [*TARGETS, pytest.param("cuda", marks=pytest.mark.cuda)])
def test_concurrent_calls_of_one_kernel(target: str) -> None:
    require_run(target)
    kernel = einc.compile(IR, INPUTS, target=target)
    failures = hammer(kernel.run)
    assert not failures, f"{target}: {len(failures)} bad calls of {THREADS * CALLS}:\n" + "\n".join(failures[:10])


@pytest.mark.opencl
def test_opencl_arguments_of_one_launch_stay_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pause between setting a kernel's arguments and enqueueing it: without the launch
    lock another thread's `set_args` lands in the pause and this launch writes the other
    thread's output (this call's output keeps garbage), on nearly every call."""
    require("opencl")
    import pyopencl

    kernel = einc.compile(IR, INPUTS, target="opencl")
    enqueue = pyopencl.enqueue_nd_range_kernel

    def slow_enqueue(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.002)  # releases the GIL: the other threads run here
        return enqueue(*args, **kwargs)

    monkeypatch.setattr(pyopencl, "enqueue_nd_range_kernel", slow_enqueue)
    failures = hammer(kernel.run, calls=min(CALLS, 6))
    assert not failures, "\n".join(failures[:10])


# --- first use from several threads of a fresh process --------------------------------

CHILD = """
import sys
sys.path.insert(0, {root!r})
from tests.test_thread_safety import first_use_child
sys.exit(first_use_child(sys.argv[1]))
"""


def loader(target: str) -> Callable[[str, Any], Runner]:
    """The runtime's own loader: builds (or reuses) and returns a runner."""
    if target == "c":
        from einc.runtime.c import load_c_kernel

        return lambda source, signature: load_c_kernel(source, signature).run
    if target == "opencl":
        from einc.runtime.opencl import load_opencl_kernel

        return load_opencl_kernel
    if target == "hlsl":
        from einc.runtime.vulkan import load_hlsl_kernel

        return load_hlsl_kernel
    if target == "sycl":
        from einc.runtime.sycl import load_sycl_kernel

        return load_sycl_kernel
    if target == "cuda":
        from einc.runtime.cuda import load_cuda_kernel

        return load_cuda_kernel
    from einc.runtime.poplar import load_poplar_kernel

    return load_poplar_kernel


def loading_runner(target: str, source: str, description: Any) -> Runner:
    """A runner that loads the kernel in each thread on its first call (so the threads'
    first calls race through the runtime's set-up), then calls it."""
    load = loader(target)
    runners: dict[int, Runner] = {}

    def run(inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]) -> None:
        thread = threading.get_ident()
        if thread not in runners:
            runners[thread] = load(source, description)
        runners[thread](inputs, outputs)

    return run


def first_use_child(payload: str) -> int:
    """In a fresh process: for each target of the payload, THREADS threads load the kernel
    and call it at once. Targets whose build is cheap (C, HLSL) build into an empty cache,
    so the threads also race to build the same entry. Prints the failures; 1 if any."""
    with open(payload, "rb") as file:
        jobs: dict[str, tuple[str, Any]] = pickle.load(file)
    failures: list[str] = []
    shared_cache = os.environ.get("EINC_CACHE_DIR")
    for target, (source, description) in jobs.items():
        if target in ("c", "hlsl"):
            os.environ["EINC_CACHE_DIR"] = str(Path(payload).with_name(f"cache-{target}-{os.getpid()}"))
        failures += [f"{target}: {f}" for f in hammer(loading_runner(target, source, description), calls=2)]
        if shared_cache is None:
            os.environ.pop("EINC_CACHE_DIR", None)
        else:
            os.environ["EINC_CACHE_DIR"] = shared_cache
    print("\n".join(failures))
    return 1 if failures else 0


def test_first_use_from_several_threads_in_fresh_processes(tmp_path: Path) -> None:
    first_use(tmp_path, TARGETS)


@pytest.mark.cuda
def test_cuda_first_use_from_several_threads_in_fresh_processes(tmp_path: Path) -> None:
    """The GPU's primary context retained by several threads at once, then used by all."""
    require_run("cuda")
    first_use(tmp_path, ("cuda",))


def first_use(tmp_path: Path, targets: tuple[str, ...]) -> None:
    jobs: dict[str, tuple[str, Any]] = {}
    for target in targets:
        if target != "c" and not toolchains.available(target)[0]:
            require(target)  # fails in CI, skips elsewhere
        compilation = Compilation(IR, "<string>", INPUTS, None, target)
        source = compilation.run_until("source")
        if target == "c":
            from einc.runtime.signature import KernelSignature

            jobs[target] = (source, KernelSignature.from_module(compilation.results["target"]))
        else:
            jobs[target] = (source, compilation.target_obj.manifest(compilation.results["target"]))
    payload = tmp_path / "jobs.pickle"
    payload.write_bytes(pickle.dumps(jobs))
    script = CHILD.format(root=str(ROOT))
    command = [sys.executable, "-c", script, str(payload)]
    children = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
        for _ in range(FRESH_PROCESSES)
    ]
    reports = []
    for k, child in enumerate(children):
        out, _ = child.communicate(timeout=300)
        if child.returncode != 0:
            reports.append(f"process {k} (exit {child.returncode}):\n{out.strip()[-3000:]}")
    assert not reports, "\n".join(reports)
