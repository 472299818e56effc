"""How deep einc's recursive walks may go. The loops of a statement nest one per axis (and one
more per schedule split), and every walk of that nest recurses once per loop: the passes (about
3 Python frames a loop), xDSL's printer, verifier and cloner (about 4), the target printers
(about 6). Python's default limit of 1000 frames stops that near 150 nested loops, well below
the ranks einc compiles, so einc raises it to `RECURSION_LIMIT` (never lowering a higher limit)
before compiling, and the frontend refuses a statement with more than `MAX_AXES` axes
(`einc.frontend.sema`), which keeps the deepest walk inside the limit with room for splits."""

from __future__ import annotations

import sys

MAX_AXES = 256
"""The most axes (loops) one statement may have: above the rank of any array NumPy, PyTorch
or DLPack pass (64), and deep enough for every level of a 256-axis nest to be split twice
within `RECURSION_LIMIT`."""
RECURSION_LIMIT = 12_000
"""The Python recursion limit einc compiles under: 768 loop levels at 6 frames each, with
room for the frames around the walks (CPython 3.11 runs Python-to-Python calls without
growing the C stack, so this is safe on an 8 MiB thread stack)."""


def allow_deep_nests() -> None:
    """Raise Python's recursion limit to `RECURSION_LIMIT` if it is lower (process-wide and
    never lowered, so threads compiling at once cannot undo each other's)."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
