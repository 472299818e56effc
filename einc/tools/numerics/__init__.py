"""Per-pass numerical checking (`--check-numerics`): see einc.tools.numerics.types.

    report = check_compilation(Compilation(text, "f.ein", target="c"))   # einc compile's pipeline
    report = check_pipeline(text, "f.ein", "convert-ein-to-affine,...")  # einc-opt's
    print(render(report))                                                 # exit status: report.ok
"""

from einc.tools.numerics.check import check_compilation, check_pipeline
from einc.tools.numerics.render import render
from einc.tools.numerics.types import LevelRun, NumericsReport, OutputCheck, PipelineStep

__all__ = [
    "LevelRun", "NumericsReport", "OutputCheck", "PipelineStep", "check_compilation",
    "check_pipeline", "render",
]  # fmt: skip
