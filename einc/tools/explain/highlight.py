"""The final source highlighted by Pygments (its style sheet goes into the page's <style>)."""

from __future__ import annotations

from html import escape

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

LEXERS = {"c": "c", "opencl": "c", "cuda": "cuda", "hip": "cuda", "hlsl": "hlsl", "sycl": "cpp", "poplar": "cpp"}
"""Pygments' lexer for each target's language (it has no OpenCL C lexer: C's is close)."""
CSS_CLASS = "hl"


def _formatter() -> HtmlFormatter[str]:
    return HtmlFormatter(cssclass=CSS_CLASS, linenos="table", style="default")


def highlight_source(text: str, target: str) -> str:
    """`text` as highlighted HTML (escaped by Pygments), line numbers in a column."""
    try:
        lexer = get_lexer_by_name(LEXERS.get(target, "cpp"))
    except ClassNotFound:
        return f'<pre class="listing">{escape(text)}</pre>'
    return highlight(text, lexer, _formatter())


def highlight_styles() -> str:
    return _formatter().get_style_defs(f".{CSS_CLASS}")
