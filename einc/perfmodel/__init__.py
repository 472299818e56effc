"""A device performance model, usable without the device: per kernel of a lowered program,
FLOPs, global memory sectors (coalescing), shared-memory bank conflicts, registers, shared
memory and occupancy, and a roofline time with what bounds it, on a device of a table of
published figures (einc/perfmodel/devices.py) or one a JSON file describes.

    from einc.perfmodel import get_device, model_module
    report = model_module(compilation.module("target"), get_device("h100"), target_class,
                          source=compilation.source_text(), manifest=manifest)
    print(report.render())

`einc.compile(...).model("h100")` and `einc check FILE -t T --model h100` use it. The floor
sits above the passes (it reads their lowered `egpu` IR) and the targets and runtimes (their
compile checks report registers), below the schedule policies that may rank by it.
docs/PERFMODEL.md describes the model and its limits.
"""

from einc.perfmodel.counts import KernelCounts, count_kernel
from einc.perfmodel.devices import DEVICES, Device, get_device, known, read_device
from einc.perfmodel.model import BOUNDS, KernelModel, ModelReport, compiled_resources, model_kernel, model_module

__all__ = [
    "BOUNDS",
    "DEVICES",
    "Device",
    "KernelCounts",
    "KernelModel",
    "ModelReport",
    "compiled_resources",
    "count_kernel",
    "get_device",
    "known",
    "model_kernel",
    "model_module",
    "read_device",
]
