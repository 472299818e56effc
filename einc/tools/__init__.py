"""The work behind einc's command lines: `jobs.py` (`einc compile`, `run` and `check` on a
file), `opt_support.py` (einc-opt's listings, dumps and diagnostics checks), `serve/` (the
codegen service), `explain/` (the HTML page of a compilation), `numerics/`
(`--check-numerics`) and `reduce/` (reproducers, their replay, and `einc reduce`)."""
