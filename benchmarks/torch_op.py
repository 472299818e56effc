"""einc ops inside PyTorch: the cost of one call, and the MNIST MLP of examples/mnist.ein.

    .venv/bin/python benchmarks/torch_op.py [--threads 2]

Per-call overhead on tiny CPU tensors (16 floats, an elementwise add): torch.add, the einc
kernel called directly on NumPy views (`Kernel.run`, the floor this layer adds to), the
registered op (`torch.ops.einc.*`), and the op under torch.no_grad(). Then the MLP
(64x784 -> 512 -> 512 -> 10, float32) as three einc ops (matmul + bias + ReLU each) against
the same module in torch, eager and under torch.compile. Reported, not asserted; medians.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import measure, table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2, help="torch and OpenMP threads")
    args = parser.parse_args()
    import os

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    import einc.torch
    from tests.test_torch_op import BATCH, EincMLP, TorchMLP, rand

    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    a, b = rand(gen, 16), rand(gen, 16)
    add = einc.torch.op("output0[N] = input0[N] + input1[N]", [a, b], name="bench_add")
    out = torch.empty(16)
    views = {"input0": a.numpy(), "input1": b.numpy()}, {"output0": out.numpy()}
    rows = []

    def us(fn) -> str:
        return f"{measure(fn).median_s * 1e6:.1f}"

    rows.append(["torch.add (16 floats)", us(lambda: torch.add(a, b))])
    rows.append(["einc Kernel.run on NumPy views", us(lambda: add.kernel.run(*views))])
    rows.append(["einc op, eager", us(lambda: add(a, b))])
    with torch.no_grad():
        rows.append(["einc op, torch.no_grad()", us(lambda: add(a, b))])
    print(table(rows, ["call", "µs"]))

    reference = TorchMLP(gen)
    model = EincMLP(reference)
    x = rand(gen, BATCH, 784)
    rows = []
    with torch.no_grad():
        for label, fn in [
            ("torch, eager", reference),
            ("einc ops, eager", model),
            ("torch, torch.compile", torch.compile(reference)),
            ("einc ops, torch.compile", torch.compile(model, fullgraph=True)),
        ]:
            rows.append([label, f"{measure(lambda: fn(x)).median_s * 1e3:.3f}"])
    print(table(rows, [f"MNIST MLP, batch {BATCH}, {args.threads} threads", "ms"]))


if __name__ == "__main__":
    main()
