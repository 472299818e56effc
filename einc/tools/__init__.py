"""The work behind einc's command lines: `opt_support.py` (einc-opt's listings, dumps and
diagnostics checks), `serve/` (the codegen service), `explain/` (the HTML page of a
compilation) and `numerics/` (`--check-numerics`)."""
