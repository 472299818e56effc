"""Print the largest error, in ulps, of every function per target and dtype, measured by the
math-accuracy sweep of tests/test_math_accuracy.py (the same inputs and exact values; seed 0).
docs/LANGUAGE.md's table comes from this script:

    PYTHONPATH=. python scripts/math_accuracy_table.py
"""

from __future__ import annotations

import sys

import numpy as np

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from tests.oracle import math_sweep as sweep
from tests.test_math_accuracy import TARGETS, dtypes, exact_values, group, inputs


def main(targets: list[str]) -> None:
    table: dict[tuple[str, str], dict[str, float]] = {}
    for target in targets:
        values = {d: inputs(d, 0) for d in dtypes(target)}
        sizes = {d: (len(v["x"]), len(v["px"])) for d, v in values.items()}
        comp = Compilation(sweep.program(sizes, group(target)), "<sweep>", target=target)
        kernel = comp.kernel()
        outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
        kernel.run({f"{k}_{d.replace('float', 'f')}": v.copy() for d, vs in values.items() for k, v in vs.items()}, outputs)
        for dtype in dtypes(target):
            exact = exact_values(dtype, 0)
            for fn, got in sweep.results(outputs, dtype, group(target)).items():
                table.setdefault((target, dtype), {})[fn] = float(np.max(sweep.ulps(got, exact[fn], dtype)))
    functions = [fn for fn in sweep.FUNCTIONS if fn not in ("round", "rfloor", "rceil", "remainder", "abs", "max", "min")]
    print("| target | dtype | " + " | ".join(functions) + " |")
    print("|---|---|" + "---|" * len(functions))
    for (target, dtype), errors in table.items():
        cells = [f"{errors[fn]:.2g}" for fn in functions]
        print(f"| {target} | {dtype} | " + " | ".join(cells) + " |")
    exact_fns = ("round", "rfloor", "rceil", "remainder", "abs", "max", "min")
    worst = max(errors.get(fn, 0.0) for errors in table.values() for fn in exact_fns)
    print(f"\n{', '.join(exact_fns)}: largest error {worst:.2g} ulps over every target and dtype")


if __name__ == "__main__":
    main(sys.argv[1:] or list(TARGETS))
