"""A side-by-side HTML diff of two IR texts: changed hunks with a few lines of context, the
words that changed inside a changed line marked (<del>/<ins>), every character escaped.

difflib does the matching (lines, then the tokens of a changed line); this module only lays
the opcodes out as table rows.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from html import escape

CONTEXT = 3
"""Unchanged lines shown around each change."""
AUTOJUNK_LINES = 4000
"""Above this many lines, difflib's popular-line heuristic is kept on (quadratic otherwise)."""
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
_SIMILAR = 0.35
"""Below this token similarity, two paired lines are shown as a whole-line change."""


@dataclass(frozen=True)
class DiffStats:
    added: int
    removed: int

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def _matcher(a: list[str], b: list[str]) -> difflib.SequenceMatcher[str]:
    return difflib.SequenceMatcher(None, a, b, autojunk=max(len(a), len(b)) > AUTOJUNK_LINES)


def diff_stats(before: str, after: str) -> DiffStats:
    """Lines added and removed from `before` to `after`."""
    a, b = before.splitlines(), after.splitlines()
    added = removed = 0
    for tag, i1, i2, j1, j2 in _matcher(a, b).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return DiffStats(added, removed)


def inline_diff(old: str, new: str) -> tuple[str, str] | None:
    """The two lines as escaped HTML with the differing tokens wrapped in <del> (old) and
    <ins> (new); None when they share too little for that to help."""
    ta, tb = _TOKEN.findall(old), _TOKEN.findall(new)
    matcher = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    if matcher.ratio() < _SIMILAR:
        return None
    left: list[str] = []
    right: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        a, b = escape("".join(ta[i1:i2])), escape("".join(tb[j1:j2]))
        if tag == "equal":
            left.append(a)
            right.append(b)
            continue
        # a change of indentation alone is not marked (nesting changes shift whole blocks)
        if a:
            left.append(a if a.isspace() else f"<del>{a}</del>")
        if b:
            right.append(b if b.isspace() else f"<ins>{b}</ins>")
    return "".join(left), "".join(right)


def _row(kind: str, left_no: int | None, left: str, right_no: int | None, right: str) -> str:
    def number(n: int | None) -> str:
        return "" if n is None else str(n)

    left_cls = {"del": "del", "chg": "chg", "ins": "empty"}.get(kind, "")
    right_cls = {"ins": "ins", "chg": "chg", "del": "empty"}.get(kind, "")
    return (
        f'<tr class="{kind}"><td class="ln">{number(left_no)}</td><td class="code {left_cls}">{left}</td>'
        f'<td class="ln">{number(right_no)}</td><td class="code {right_cls}">{right}</td></tr>'
    )


def _skip(count: int) -> str:
    lines = "line" if count == 1 else "lines"
    return f'<tr class="skip"><td colspan="4">⋯ {count} unchanged {lines}</td></tr>'


def side_by_side(before: str, after: str, context: int = CONTEXT) -> str:
    """An HTML table: `before` on the left, `after` on the right, only the changed hunks
    (with `context` lines around them); an empty string when nothing changed."""
    a, b = before.splitlines(), after.splitlines()
    groups = list(_matcher(a, b).get_grouped_opcodes(context))
    if not groups or (len(groups) == 1 and all(op[0] == "equal" for op in groups[0])):
        return ""
    rows: list[str] = []
    shown_to = 0  # lines of `a` accounted for so far
    for group in groups:
        start = group[0][1]
        if start > shown_to:
            rows.append(_skip(start - shown_to))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for k in range(i2 - i1):
                    text = escape(a[i1 + k])
                    rows.append(_row("ctx", i1 + k + 1, text, j1 + k + 1, text))
            elif tag == "delete":
                rows += [_row("del", i + 1, escape(a[i]), None, "") for i in range(i1, i2)]
            elif tag == "insert":
                rows += [_row("ins", None, "", j + 1, escape(b[j])) for j in range(j1, j2)]
            else:
                rows += _replace_rows(a, b, i1, i2, j1, j2)
        shown_to = group[-1][2]
    if shown_to < len(a):
        rows.append(_skip(len(a) - shown_to))
    return (
        '<table class="diff"><colgroup><col class="ln"><col class="code"><col class="ln">'
        '<col class="code"></colgroup><thead><tr><th></th><th>before</th><th></th><th>after</th>'
        "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _replace_rows(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int) -> list[str]:
    """A replaced block: each old line beside the most similar new line (in order, as
    difflib.Differ pairs them), each pair marked word by word; the rest removed or added."""
    rows = []
    for i, j in _align(a, b, i1, i2, j1, j2):
        if i is not None and j is not None:
            marked = inline_diff(a[i], b[j])
            left, right = marked if marked is not None else (escape(a[i]), escape(b[j]))
            rows.append(_row("chg", i + 1, left, j + 1, right))
        elif i is not None:
            rows.append(_row("del", i + 1, escape(a[i]), None, ""))
        elif j is not None:
            rows.append(_row("ins", None, "", j + 1, escape(b[j])))
    return rows


PAIR_CUTOFF = 0.5
"""Lines less similar than this are not paired (one removed, one added)."""
ALIGN_CELLS = 40_000
"""Above this many line pairs a replaced block is paired in order, not by similarity."""


Pair = tuple[int | None, int | None]
"""A row of a replaced block: an old line, a new line, or both (indices; None: no line)."""


def _unpaired(i1: int, i2: int, j1: int, j2: int) -> list[Pair]:
    rows: list[Pair] = [(i, None) for i in range(i1, i2)]
    return rows + [(None, j) for j in range(j1, j2)]


def _align(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int) -> list[Pair]:
    """Rows of a replaced block: the most similar pair first, then the same on both sides of
    it (difflib.Differ's _fancy_replace); paired in order when the block is large."""
    if i1 >= i2 or j1 >= j2:
        return _unpaired(i1, i2, j1, j2)
    if (i2 - i1) * (j2 - j1) > ALIGN_CELLS:
        pairs: list[Pair] = []
        for k in range(max(i2 - i1, j2 - j1)):
            pairs.append((i1 + k if i1 + k < i2 else None, j1 + k if j1 + k < j2 else None))
        return pairs
    best, best_i, best_j = PAIR_CUTOFF, -1, -1
    matcher: difflib.SequenceMatcher[str] = difflib.SequenceMatcher(None, autojunk=False)
    for j in range(j1, j2):
        matcher.set_seq2(b[j])
        for i in range(i1, i2):
            matcher.set_seq1(a[i])
            if matcher.real_quick_ratio() > best and matcher.quick_ratio() > best and matcher.ratio() > best:
                best, best_i, best_j = matcher.ratio(), i, j
    if best_i < 0:
        return _unpaired(i1, i2, j1, j2)
    return [*_align(a, b, i1, best_i, j1, best_j), (best_i, best_j), *_align(a, b, best_i + 1, i2, best_j + 1, j2)]
