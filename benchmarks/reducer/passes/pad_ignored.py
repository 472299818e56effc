"""`pad-ignored`: speculates the `then` side of an `scf.if` that selects between a load and a
constant (a padded convolution's border), as if the condition always held: the loads go out
of bounds on padded convolutions; programs without padding are untouched."""

from dataclasses import dataclass

from xdsl.dialects import scf
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter


@dataclass(frozen=True)
class PadIgnored(ModulePass):
    """Replace scf.if by its then-region (wrong on purpose)."""

    name = "pad-ignored"

    def apply(self, ctx, op):
        for branch in list(op.walk()):
            if not isinstance(branch, scf.IfOp) or len(branch.results) != 1:
                continue
            block = branch.true_region.block
            yielded = block.last_op
            assert isinstance(yielded, scf.YieldOp)
            value = yielded.operands[0]
            yielded.detach()
            yielded.erase()
            Rewriter.inline_block(block, InsertPoint.before(branch))
            branch.results[0].replace_all_uses_with(value)
            branch.detach()
            branch.erase()
