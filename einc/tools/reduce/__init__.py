"""Reproducers, their replay, and `einc reduce`: a failure einc reports (an internal error, a
verifier failure, an error, a `--check-numerics` mismatch) as one self-contained file that
replays it, and a reducer that shrinks it while it fails the same way.

    repro = Reproducer.parse(text, "r.txt")      # einc.tools.reduce.reproducer: the file
    outcome = replay(repro)                      # einc.tools.reduce.replay: does it still fail so?
    reduced = reduce(repro, Budget(60.0))        # einc.tools.reduce.reducer: delta debugging

See docs/RESEARCH.md ("Reproducers and einc reduce").
"""

from einc.tools.reduce.reproducer import Failure, Plugin, Reproducer

__all__ = ["Failure", "Plugin", "Reproducer"]
