"""The final source highlighted by Pygments (its style sheet goes into the page's <style>)."""

from __future__ import annotations

from html import escape

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from einc.targets import get_all_targets

CSS_CLASS = "hl"


def _formatter() -> HtmlFormatter[str]:
    return HtmlFormatter(cssclass=CSS_CLASS, linenos="table", style="default")


def highlight_source(text: str, target: str) -> str:
    """`text` as highlighted HTML (escaped by Pygments), line numbers in a column."""
    try:
        targets = get_all_targets()  # each target names its language's lexer (OpenCL C: C's)
        lexer = get_lexer_by_name(targets[target]().lexer if target in targets else "cpp")
    except ClassNotFound:
        return f'<pre class="listing">{escape(text)}</pre>'
    return highlight(text, lexer, _formatter())


def highlight_styles() -> str:
    return _formatter().get_style_defs(f".{CSS_CLASS}")
