"""einc inside PyTorch: `einc.torch.op(ir, input_dict or example tensors, target="c")` makes a
`torch.library` custom op (eager, `torch.compile`, `torch.export`) that runs an einc kernel.

    import einc.torch
    mm = einc.torch.op("output0[N, M] +=! input0[N, K] * input1[K, M]",
                       {"input0": {"dtype": "float32", "shape": [64, 32]},
                        "input1": {"dtype": "float32", "shape": [32, 16]}})
    y = mm(a, b)          # a torch.Tensor; several outputs come back as a tuple
    y = mm(a[:17], b)     # other shapes too: a kernel per shape signature, compiled on first call
    mm.tune(trials=32)    # einc's tuner; this op and later ones use the best record (per shape)

Needs PyTorch (`pip install -e '.[torch]'`); `maker.py` registers the ops and keeps their
kernels, `shapes.py` says which sizes may vary and must agree (the fake kernel's shapes under
`torch.compile` and `torch.export`), `tensors.py` converts and checks tensors and runs the
kernel on them.
"""

from einc.torch.maker import EincOp, op
from einc.torch.tensors import TensorSpec

__all__ = ["EincOp", "TensorSpec", "op"]
