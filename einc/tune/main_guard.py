"""The `if __name__ == "__main__":` guard a script needs before einc's tuner starts its build
workers. They are 'spawn' processes (a forked process would inherit the compiler's threads
and locks), and a spawn worker imports the main script again: a tuning call at the script's
top level, outside the guard, runs again in every worker, whose start then fails
(multiprocessing's "bootstrapping phase" error), and every candidate came back as a dead
build worker. `check_main_guard` refuses such a call up front, at its line of the script."""

from __future__ import annotations

import ast
import inspect
import sys
from types import FrameType

from einc.errors import SourceLocation, UsageError


def check_main_guard(what: str = "tuning") -> None:
    """A UsageError when this call comes from the top level of the main script (run as a
    file) outside `if __name__ == "__main__":`; nothing for an interactive session, `-c`, a
    call under the guard or from a function the guarded code calls."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not isinstance(path, str):
        return
    frame: FrameType | None = inspect.currentframe()
    # the main script's own top level: its module dict (a forkserver or `-c` frame also says
    # `__name__ == "__main__"` while `__main__.__file__` names another file)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:
        return
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        tree = ast.parse(text, path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return
    statement = _top_level_statement(tree, frame.f_lineno)
    if statement is None or _guarded(statement, frame.f_lineno):
        return
    raise UsageError(
        f"{what} starts worker processes with the 'spawn' method, which import this script again; "
        f'a call at its top level runs again in each of them: put it under `if __name__ == "__main__":`',
        SourceLocation(path, statement.lineno, statement.col_offset + 1, 1, text),
    )


def _top_level_statement(tree: ast.Module, line: int) -> ast.stmt | None:
    for statement in tree.body:
        end = statement.end_lineno or statement.lineno
        if statement.lineno <= line <= end:
            return statement
    return None


def _guarded(node: ast.AST, line: int) -> bool:
    """Whether `line` lies, within `node`, in the body of an `if __name__ == "__main__":`."""
    if isinstance(node, ast.If) and _is_main_test(node.test):
        if any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in node.body):
            return True
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt) and child.lineno <= line <= (child.end_lineno or child.lineno):
            if _guarded(child, line):
                return True
    return False


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(mains) == 1
