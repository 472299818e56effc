"""Write the default schedule's C of benchmarks/cpu_operators.py's operators at batch 1 and 16.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/data/cpu/xeon_matmul_probes/dump.py OUTDIR matmul_small,bmm_qk,bmm_av
"""

import pathlib
import sys

sys.path.insert(0, "benchmarks")
from cpu_operators import ops, task_of  # noqa: E402

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for batch in (1, 16):
    found = ops(batch)
    for key in sys.argv[2].split(","):
        (out / f"{key}_b{batch}.c").write_text(task_of(found[key]).compilation(None).run_until("source"))
