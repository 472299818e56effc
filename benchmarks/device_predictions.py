"""The performance model's predictions for the GPU benchmark table (benchmarks/device_kernels.py
`--size gpu`) on GPUs that are not here: H100 and A100 (the CUDA kernel; NVRTC reports its
registers) and one MI250X GCD (the HIP kernel; hipcc reports them), for the default and every hand
schedule (benchmarks/device_schedules.py); the float16 MatMul's hand schedule runs on the tensor cores
(`transform.einc.tensorize`: mma.sync on CUDA, MFMA on HIP), its default on the vector units. Modelled, not
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
from device_kernels import Case, cases, script  # noqa: E402

TARGET = {"h100": "cuda", "a100": "cuda", "mi250x": "hip"}
INTRINSIC = {"cuda": "mma.m16n8k16", "hip": "mfma.16x16x16"}

def predict(case: Case, schedule: str | None, device: str) -> dict[str, Any]:
    import einc

    target = TARGET[device]
    row: dict[str, Any] = {"kernel": case.name, "device": device, "target": target}
    try:
        kernel = einc.compile(case.ir, case.inputs, target=target, schedule=schedule or "default",
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
    selected = cases("gpu")
    selected = [c for c in selected if not args.only or any(c.name.startswith(p) for p in args.only.split(","))]
    rows: list[dict[str, Any]] = []
    for case in selected:
        for device in args.devices.split(","):
            variants: list[tuple[str, str | None]] = [("default", None)]
            for name, lines in case.hands.items():  # benchmarks/device_schedules.py's sets
                hand = script(lines)
                variants.append((f"hand: {name}", hand.replace(INTRINSIC["cuda"], INTRINSIC[TARGET[device]])))
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
