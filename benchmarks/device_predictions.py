"""The performance model's predictions for the GPU benchmark table (benchmarks/device_kernels.py
`--size gpu`) on GPUs that are not here: H100 and A100 (the CUDA kernel; NVRTC reports its
registers) and one MI250X GCD (the HIP kernel; hipcc reports them), for the default and hand
schedules, plus a float16 MatMul on the tensor cores (`transform.einc.tensorize`: mma.sync on
CUDA, MFMA on HIP) beside float16 on the vector units (the default schedule). Modelled, not
measured: nothing here runs a kernel.

    .venv/bin/python benchmarks/device_predictions.py [--devices h100,a100,mi250x] [--only MatMul]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table  # noqa: E402
from device_kernels import Case, cases  # noqa: E402
from device_schedules import script  # noqa: E402

TARGET = {"h100": "cuda", "a100": "cuda", "mi250x": "hip"}
INTRINSIC = {"cuda": "mma.m16n8k16", "hip": "mfma.16x16x16"}

HALF = """input input0: float16[{n}, {n}]
input input1: float16[{n}, {n}]
output0[N, M] +=! input0[N, K].cast(`float32`) * input1[K, M].cast(`float32`)
"""
# One warp (CUDA) / wavefront (HIP) per 16 x 16 output tile, the whole K loop one tile op
# through the tensor cores; the inputs are read from global memory (no shared staging).
TENSORIZE = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    '%m = transform.einc.match stmt "output0" axis "M" in %root',
    "%no, %ni = transform.einc.tile %n by 16",
    "%mo, %mi = transform.einc.tile %m by 16",
    "%r:4 = transform.einc.reorder %no, %mo, %ni, %mi",
    'transform.einc.bind %r#0 to "block.y"',
    'transform.einc.bind %r#1 to "block.x"',
    '%lanes = transform.einc.tensorize %r#2 "INTRINSIC"',
]


def half_case(n: int) -> Case:
    return Case(f"MatMul {n}^3 fp16", HALF.format(n=n), {}, 2.0 * n**3, lambda a: a["input0"], None,
                script(TENSORIZE))  # fmt: skip


def predict(case: Case, schedule: str | None, device: str) -> dict[str, Any]:
    import einc

    target = TARGET[device]
    row: dict[str, Any] = {"kernel": case.name, "device": device, "target": target}
    try:
        kernel = einc.compile(case.ir, case.inputs or None, target=target, schedule=schedule or "default",
                              use_records=False)  # fmt: skip
        report = kernel.model(device)
    except einc.EincError as err:
        row["note"] = str(err).splitlines()[0][:90]
        return row
    row.update(ms=report.time_s * 1e3, bound=report.bound, flops=report.flops, kernels=len(report.kernels))
    if case.flops:
        row["rate"] = f"{case.flops / report.time_s / 1e12:.1f} TFLOP/s"
    else:
        nbytes = sum(b.bytes for k in report.kernels for b in k.counts.buffers.values())
        row["rate"] = f"{nbytes / report.time_s / 1e9:.0f} GB/s (buffers touched)"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="h100,a100,mi250x")
    parser.add_argument("--only", default="", help="comma-separated kernel name prefixes")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    selected = [*cases("gpu"), half_case(4096)]
    selected = [c for c in selected if not args.only or any(c.name.startswith(p) for p in args.only.split(","))]
    rows: list[dict[str, Any]] = []
    for case in selected:
        for device in args.devices.split(","):
            variants: list[tuple[str, str | None]] = [("default", None)]
            if case.hand:
                label = "tensor cores" if "tensorize" in case.hand else "hand"
                variants.append((label, case.hand.replace("INTRINSIC", INTRINSIC[TARGET[device]])))
            for variant, schedule in variants:
                row = {"schedule": variant, **predict(case, schedule, device)}
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    header = ["kernel", "device (target)", "schedule", "model ms", "rate", "bound", "note"]
    print(table([[r["kernel"], f"{r['device']} ({r['target']})", r["schedule"],
                  f"{r['ms']:.3f}" if "ms" in r else "", r.get("rate", ""), r.get("bound", ""), r.get("note", "")]
                 for r in rows], header))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
