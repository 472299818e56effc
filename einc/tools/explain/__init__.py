"""`einc explain`: the compilation pipeline as one self-contained HTML page — each step's IR
beside the one before it, the schedule's ops and their effects, the final source, each step's
numeric check and time.

    collect(comp, seed, shape_scale) -> NumericsReport      (einc.tools.explain.collect)
    render_page(report, context) -> str                     (einc.tools.explain.page)
    explain_file_command(path, target, ...)                 (`einc explain`)
"""

from __future__ import annotations

from einc.tools.explain.collect import PageContext, collect, page_context
from einc.tools.explain.command import ExplainResult, explain_file_command
from einc.tools.explain.page import render_page

__all__ = ["ExplainResult", "PageContext", "collect", "explain_file_command", "page_context", "render_page"]
