"""C conformance programs (tests/test_conformance.py's) built with AddressSanitizer and
UndefinedBehaviorSanitizer (float-cast-overflow included, every report fatal) through
`einc.compile(..., cflags=...)`, run in a subprocess, checked against their references.

The Python interpreter is not instrumented, so the subprocess preloads the ASan runtime
(`LD_PRELOAD=$(gcc -print-file-name=libasan.so)`, leak detection off: CPython's own
allocations are not einc's); the compiler it starts runs without the preload. The slice
below covers indexing (gathers, padding, pooling, convolution, reshapes), casts,
integer division and shifts and reductions; EINC_SANITIZE_PROGRAMS=all runs every program.
Inputs are seeded per program, so a run is reproducible.

Also: `cflags` and `$EINC_CFLAGS` reach the C compiler and are part of the cache key.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import einc
from einc.errors import TargetError, ToolchainError

ROOT = Path(__file__).resolve().parent.parent
SANITIZE = ("-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")
SLICE = (
    "matmul", "convolution_with_pad", "max_pool", "gather", "computed_gather", "pad", "concat", "depth_to_space",
    "cast", "float16_casts", "int_floor_div_mod", "int_shifts", "softmax", "and_or_reductions",
)  # fmt: skip
REPORTS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "UndefinedBehaviorSanitizer")


def sanitized_run(names: list[str]) -> int:
    """In the preloaded subprocess: compile each program with SANITIZE, run it on seeded
    inputs, check it; print one line per program. 1 if a result is wrong."""
    os.environ.pop("LD_PRELOAD", None)  # the compilers this process starts need no ASan
    from tests.test_conformance import ALL, check_against_reference, random_inputs

    wrong = 0
    for name in names:
        prog = next(p for p in ALL if p.name == name)
        seed = zlib.crc32(name.encode())
        kernel = einc.compile(prog.ir, prog.input_dict, target="c", extra_outputs=prog.extra_outputs, cflags=SANITIZE)
        assert "-fsanitize" not in kernel.source
        inputs = random_inputs(prog, seed)
        try:
            check_against_reference(prog, kernel(**{k: v.copy() for k, v in inputs.items()}), inputs, seed)
        except AssertionError as error:
            wrong += 1
            print(f"WRONG {name}: {error}", flush=True)
            continue
        print(f"ok {name}", flush=True)
    return 1 if wrong else 0


CHILD = """
import sys
sys.path.insert(0, {root!r})
from tests.test_sanitizers import sanitized_run
sys.exit(sanitized_run(sys.argv[1:]))
"""


def asan_runtime() -> str:
    cc = os.environ.get("CC") or "cc"
    done = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True, check=False)
    path = done.stdout.strip()
    if done.returncode != 0 or not os.path.isabs(path) or not os.path.exists(path):
        pytest.fail(f"{cc} has no AddressSanitizer runtime (libasan.so): {done.stdout}{done.stderr}")
    return path


def test_conformance_programs_are_clean_under_asan_and_ubsan() -> None:
    from tests.test_conformance import ALL

    names = [p.name for p in ALL] if os.environ.get("EINC_SANITIZE_PROGRAMS") == "all" else list(SLICE)
    assert set(names) <= {p.name for p in ALL}
    env = {
        **os.environ,
        "LD_PRELOAD": asan_runtime(),
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:halt_on_error=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    }
    env.pop("EINC_CFLAGS", None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(ROOT)), *names],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False,
    )  # fmt: skip
    reports = [line for line in done.stderr.splitlines() if any(r in line for r in REPORTS)]
    checked = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("ok ")]
    assert not reports and done.returncode == 0, (
        f"exit {done.returncode}; checked {len(checked)} of {len(names)}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    )
    assert checked == names, done.stdout


# --- the flags reach the compiler -----------------------------------------------------------

IR = "output0[N] = input0[N] * 2.0"
INPUTS = {"input0": {"dtype": "float32", "shape": [8]}}


def library_of(kernel: einc.Kernel) -> Path:
    runner = kernel._runner  # a bound CKernel.run
    return runner.__self__.library.path


def test_cflags_and_EINC_CFLAGS_reach_the_compiler_and_the_cache_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EINC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EINC_CFLAGS", raising=False)
    plain = library_of(einc.compile(IR, INPUTS))
    marked_kernel = einc.compile(IR, INPUTS, cflags=["-Wl,-soname,einc-cflags-marker"])
    marked = library_of(marked_kernel)
    assert marked != plain and b"einc-cflags-marker" in marked.read_bytes()
    np.testing.assert_array_equal(marked_kernel(input0=np.arange(8, dtype=np.float32))["output0"], 2 * np.arange(8))
    monkeypatch.setenv("EINC_CFLAGS", "-Wl,-soname,einc-env-marker")
    from_env = library_of(einc.compile(IR, INPUTS))
    assert from_env not in (plain, marked) and b"einc-env-marker" in from_env.read_bytes()
    both = library_of(einc.compile(IR, INPUTS, cflags=["-DUNUSED=1"]))
    assert both not in (plain, marked, from_env) and b"einc-env-marker" in both.read_bytes()


def test_bad_cflags_are_reported() -> None:
    with pytest.raises(TargetError, match="cflags apply to the C target only"):
        einc.compile(IR, INPUTS, target="opencl", cflags=["-O1"])
    with pytest.raises(ToolchainError, match="-fno-such-flag"):
        einc.compile(IR, INPUTS, cflags=["-fno-such-flag"])
    with pytest.raises(TargetError, match="list of flags"):
        einc.compile(IR, INPUTS, cflags="-O1")  # type: ignore[arg-type]


def test_unsplittable_EINC_CFLAGS(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EINC_CFLAGS", "-DX='unclosed")
    with pytest.raises(ToolchainError, match="EINC_CFLAGS=.* cannot be split"):
        einc.compile(IR, INPUTS)
