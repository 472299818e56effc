"""OpenCL kernels under Oclgrind: the conformance programs (tests/test_conformance.py) compiled
for OpenCL and run on Oclgrind's simulated device with its API checks and data-race detection
(`oclgrind --check-api --data-races`; all of them but one Oclgrind cannot simulate,
UNSIMULATED), which must report nothing, and whose numbers must match
the programs' float64 references. One report is expected and ignored: pyopencl's program build
asks clGetDeviceInfo for a parameter Oclgrind 21.10 does not know (CL_INVALID_VALUE for
'param_name', outside einc's code). Oclgrind's `--uninitialized` plugin stops on LLVM's
`freeze` instruction (unsupported by 21.10), so it is not used.

This file is also the runner: `oclgrind ... python -m tests.test_oclgrind NAME...` compiles and
runs the named programs in that process (Oclgrind's runtime preloaded, so einc's OpenCL runtime
sees only the Oclgrind device) and prints `ok NAME` per program. Oclgrind is installed by
scripts/install_toolchains.sh (apt oclgrind); without it the test skips (fails in CI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

UNSIMULATED = {"pow_max_min": "Oclgrind 21.10 has no llvm.abs.i32, which its clang makes of abs()"}
"""Conformance programs Oclgrind cannot run (a limit of the simulator, not of einc)."""


def programs() -> list[str]:
    """Every conformance program but UNSIMULATED (about ten seconds in all under Oclgrind)."""
    from tests.test_conformance import ALL

    return [p.name for p in ALL if p.name not in UNSIMULATED]

SEED = 20240611
IGNORED = re.compile(r"Function: clGetDeviceInfo\s+Error:\s+CL_INVALID_VALUE\s+For argument 'param_name'")


def reports(stderr: str) -> list[str]:
    """Oclgrind's reports (blank-line separated blocks naming an error or a race), less the
    ignored pyopencl probe."""
    blocks = [b.strip() for b in re.split(r"\n\s*\n", stderr) if b.strip()]
    found = [b for b in blocks if re.search(r"(?i)oclgrind|invalid|race|error|warning", b)]
    return [b for b in found if not IGNORED.search(b)]


def run(names: list[str]) -> None:
    """In the Oclgrind-wrapped process: compile, run and check each named program."""
    import einc
    from tests.test_conformance import ALL, check_against_reference, random_inputs

    for name in names:
        prog = next(p for p in ALL if p.name == name)
        kernel = einc.compile(prog.ir, prog.input_dict, target="opencl", extra_outputs=prog.extra_outputs)
        inputs = random_inputs(prog, SEED)
        outputs = kernel(**{k: v.copy() for k, v in inputs.items()})
        check_against_reference(prog, outputs, inputs, SEED)
        print(f"ok {name}", flush=True)


def require_oclgrind() -> None:
    from einc.targets.toolchains import required

    if shutil.which("oclgrind") is None:
        if required("opencl"):
            pytest.fail("oclgrind missing in CI (scripts/install_toolchains.sh installs it)")
        pytest.skip("oclgrind is not installed (apt oclgrind)")


@pytest.mark.opencl
def test_conformance_kernels_are_clean_under_oclgrind() -> None:
    require_oclgrind()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    names = programs()
    cmd = ["oclgrind", "--check-api", "--data-races", sys.executable, "-m", "tests.test_oclgrind", *names]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    log = f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-8000:]}"
    assert proc.returncode == 0, log
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("ok ")] == [f"ok {n}" for n in names], log
    found = reports(proc.stderr)
    assert not found, "Oclgrind reports:\n" + "\n\n".join(found[:20]) + "\n" + log


if __name__ == "__main__":
    run(sys.argv[1:])


BAD_KERNEL = """
import numpy as np, pyopencl as cl
ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])
queue = cl.CommandQueue(ctx)
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 16)
src = "__kernel void k(__global float* a, __local float* t) { t[0] = get_local_id(0); a[get_global_id(0)] = t[0]; }"
prog = cl.Program(ctx, src).build()
prog.k(queue, (8,), (8,), buf, cl.LocalMemory(4))
queue.finish()
"""


@pytest.mark.opencl
def test_oclgrind_reports_are_caught() -> None:
    """The check above can fail: a kernel writing past its buffer, with a data race on local
    memory, under the same Oclgrind options yields reports that `reports` keeps."""
    require_oclgrind()
    proc = subprocess.run(["oclgrind", "--check-api", "--data-races", sys.executable, "-c", BAD_KERNEL],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    found = reports(proc.stderr)
    assert any("Invalid write" in r for r in found), proc.stderr[-4000:]
    assert any("data race" in r.lower() for r in found), proc.stderr[-4000:]
