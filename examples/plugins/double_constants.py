"""An example einc pass plugin: `einc-opt FILE --load-pass-plugin double_constants.py`.

`annotate-constants` is a small, deliberately visible pass that changes no number: it tags
every floating-point `arith.constant` with `einc.note = "<tag> #<n>"` (its order in the
module), so the IR printed after it shows exactly which constants the program holds, and a
researcher can watch the tags survive (or not) the passes after it.

    einc-opt examples/softmax.ein --load-pass-plugin examples/plugins/double_constants.py \\
        --pass-pipeline 'convert-ein-to-affine,annotate-constants{tag=seen}'
    einc compile examples/softmax.ein --load-pass-plugin examples/plugins/double_constants.py \\
        --pipeline-hook 'loops=annotate-constants' --dump-after loops

(The file's name is kept from the issue's example; a pass that doubled constants would
miscompile every program, see docs/RESEARCH.md for a deliberately wrong one.)
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, ModuleOp, StringAttr
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class AnnotateConstantsPass(ModulePass):
    """Tag each floating-point constant with `einc.note = "<tag> #<n>"` (numbers unchanged)."""

    name = "annotate-constants"

    tag: str = "constant"
    """The word in each note."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        count = 0
        for const in op.walk():
            if isinstance(const, arith.ConstantOp) and isinstance(const.value, FloatAttr):
                const.attributes["einc.note"] = StringAttr(f"{self.tag} #{count}")
                count += 1
