"""`crash-rsqrt`: a cost model without an entry for `math.rsqrt`: a KeyError on programs with
an rsqrt (layer normalisation), fine on the others. Runs after the target's passes."""

from dataclasses import dataclass

from xdsl.passes import ModulePass

COSTS = {"math.exp": 20, "math.sqrt": 15, "arith.divf": 10, "math.exp2": 18}


@dataclass(frozen=True)
class CrashRsqrt(ModulePass):
    """Sum the cost of the math ops (crashes on rsqrt)."""

    name = "crash-rsqrt"

    def apply(self, ctx, op):
        total = 0
        for o in op.walk():
            if o.name.startswith("math."):
                total += COSTS[o.name]
