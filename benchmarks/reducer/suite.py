"""The reducer's benchmark suite: 20 seeded miscompiling plugin passes (benchmarks/reducer/passes/,
each wrong on some programs only) over the large example programs, each found the way a
researcher finds it (one command: `einc compile ... --check-numerics --reproducer R`, an
internal error's automatic reproducer, `einc-opt ... --reproducer R`) and then reduced
(`einc reduce R`). benchmarks/reduce_suite.py runs it and writes the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PASSES = HERE / "passes"
MNIST = "examples/mnist.ein"
BERT = "benchmarks/reducer/programs/bert_layer.ein"
CONV = "examples/conv2d_pad.ein"
CONVNET = "benchmarks/reducer/programs/convnet.ein"
MNIST_SCHEDULE = "benchmarks/reducer/programs/mnist_schedule.mlir"


@dataclass(frozen=True)
class Case:
    name: str
    """The pass (its plugin is PASSES/<name with _>.py)."""
    program: str
    kind: str
    """The failure it causes: numerics, crash, error or verifier."""
    hook: str | None = None
    """`einc compile --pipeline-hook STAGE=PASS`."""
    pipeline: str | None = None
    """`einc-opt -p PIPELINE` instead of einc compile."""
    schedule: str | None = None
    """`einc compile --schedule FILE` (the pass applied from the schedule)."""

    @property
    def plugin(self) -> str:
        return str((PASSES / f"{self.name.replace('-', '_')}.py").relative_to(ROOT))

    def discover(self, reproducer: str) -> list[str]:
        """The one command that finds the failure and writes `reproducer`."""
        if self.pipeline is not None:
            command = ["einc-opt", self.program, "--load-pass-plugin", self.plugin, "-p", self.pipeline]
        else:
            command = ["einc", "compile", self.program, "--no-records", "--load-pass-plugin", self.plugin]
            command += ["--pipeline-hook", self.hook] if self.hook is not None else []
            command += ["--schedule", self.schedule] if self.schedule is not None else []
        if self.kind == "numerics":
            command.append("--check-numerics")
        return [*command, "--reproducer", reproducer]


CASES = [
    Case("relu-dropped", MNIST, "numerics", hook="loops=relu-dropped"),
    Case("exp-as-exp2", BERT, "numerics", hook="loops=exp-as-exp2"),
    Case("rsqrt-as-sqrt", BERT, "numerics", hook="scheduled=rsqrt-as-sqrt"),
    Case("softmax-shift-flipped", BERT, "numerics", hook="loops=softmax-shift-flipped"),
    Case("short-long-reduction", MNIST, "numerics", hook="loops=short-long-reduction"),
    Case("pad-ignored", CONV, "numerics", hook="loops=pad-ignored"),
    Case("max-init-one", CONVNET, "numerics", hook="loops=max-init-one"),
    Case("cse-loads", BERT, "numerics", hook="loops=cse-loads"),
    Case("divide-as-multiply", BERT, "numerics", hook="ein=divide-as-multiply"),
    Case("canonicalize-sub", BERT, "numerics", pipeline="convert-ein-to-affine,canonicalize,canonicalize-sub,cse"),
    Case("drop-last-tile", CONV, "numerics", hook="scheduled=drop-last-tile"),
    Case("vector-add-as-sub", MNIST, "numerics", hook="target=vector-add-as-sub"),
    Case("window-offset-dropped", CONVNET, "numerics", hook="loops=window-offset-dropped"),
    Case("bias-first-element", MNIST, "numerics", hook="loops=bias-first-element"),
    Case("truncate-reduction", MNIST, "numerics", schedule=MNIST_SCHEDULE),
    Case("crash-deep-nest", CONV, "crash", hook="loops=crash-deep-nest"),
    Case("crash-rsqrt", BERT, "crash", hook="target=crash-rsqrt"),
    Case("crash-in-pattern", MNIST, "crash", hook="loops=crash-in-pattern"),
    Case("mulf-to-f64", BERT, "verifier", pipeline="convert-ein-to-affine,canonicalize,mulf-to-f64,cse"),
    Case("refuse-long-reduction", MNIST, "error", hook="scheduled=refuse-long-reduction"),
]
