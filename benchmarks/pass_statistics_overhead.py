"""What `--pass-statistics` costs: einc compile's pipeline (frontend to source, the target's
default schedule) on the example programs, with the statistics hooks on and off, in CPU time.

    python benchmarks/pass_statistics_overhead.py [--repeat 9] [-t c]

Each program is compiled `repeat` times each way, interleaved (off, on, off, on, ...), in one
process after a warm-up compile; the medians are compared. Off, the hooks are not installed
(xDSL's `PassPipeline.apply` and `PatternRewriteWalker.rewrite_region` are xDSL's own), so
"off" is the plain compile. The machine is shared: CPU time, medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from einc.compiler.driver import Compilation  # noqa: E402
from einc.ir.pass_statistics import Statistics, instrumenting  # noqa: E402

PROGRAMS = ["examples/matmul.ein", "examples/softmax.ein", "examples/layernorm.ein", "examples/mnist.ein",
            "examples/conv2d_pad.ein", "benchmarks/reducer/programs/bert_layer.ein",
            "benchmarks/reducer/programs/convnet.ein"]  # fmt: skip


def compile_once(path: str, target: str, on: bool) -> float:
    text = (ROOT / path).read_text()
    start = time.process_time()
    comp = Compilation(text, path, target=target, use_records=False)
    if on:
        with instrumenting(Statistics()) as stats:
            comp.run_until("source")
        stats.render()
    else:
        comp.run_until("source")
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("-t", "--target", default="c")
    args = parser.parse_args()
    print("| program | compile, off (ms) | compile, on (ms) | cost |")
    print("|---|---|---|---|")
    costs = []
    for path in PROGRAMS:
        compile_once(path, args.target, False)
        off: list[float] = []
        on: list[float] = []
        for _ in range(args.repeat):
            off.append(compile_once(path, args.target, False))
            on.append(compile_once(path, args.target, True))
        a, b = statistics.median(off), statistics.median(on)
        costs.append(b / a - 1)
        print(f"| {Path(path).stem} | {a * 1e3:.0f} | {b * 1e3:.0f} | {100 * (b / a - 1):+.1f}% |")
    print(f"\nmedian cost {100 * statistics.median(costs):+.1f}%, largest {100 * max(costs):+.1f}% "
          f"(CPU time, median of {args.repeat}, target {args.target})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
