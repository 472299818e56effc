"""einc's floors: every module's imports (lazy in-function ones included) go down or
sideways, never up. The floors, bottom to top:

    errors, ir -> dialects -> passes.utils -> runtime -> targets -> passes ->
    dialects.einc_transform (the transform interpreter), context (every dialect) -> frontend ->
    schedule, default_schedule, schedules, schedule_builder -> reference, interp, interp_egpu ->
    driver, tune (the tuner; the driver reads its records) -> numerics, explain (the pipeline
    walked step by step, its HTML page) -> cli, opt, serve, torch (the command lines, the codegen
    service, PyTorch custom ops) -> einc

A module may import its own floor or any floor below it. Imports under `if TYPE_CHECKING:`
load nothing at run time and are not edges (annotations may name a higher floor's types). `KNOWN` lists the upward edges still
to be removed, each with its reason; the test fails on a new upward edge and on a listed
edge that no longer exists (so the list only shrinks)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "einc"

FLOORS: list[tuple[str, ...]] = [
    ("einc.errors", "einc.ir"),
    ("einc.dialects",),
    ("einc.transforms",),
    ("einc.runtime",),
    ("einc.targets",),
    ("einc.passes",),
    ("einc.dialects.einc_transform", "einc.dialects.context"),
    ("einc.frontend",),
    ("einc.schedule",),
    ("einc.semantics",),
    ("einc.compiler", "einc.tune"),
    ("einc.tools.numerics", "einc.tools.explain", "einc.tools.jobs"),
    ("einc.cli", "einc.opt", "einc.tools", "einc.torch"),
    ("einc",),
]

KNOWN: dict[tuple[str, str], str] = {}


def floor(module: str) -> int:
    """The index of the most specific floor prefix of `module`."""
    best, best_len = None, -1
    for index, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best is not None, f"module {module} is on no floor: add it to FLOORS"
    return best


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every einc module `path` imports (absolute names; `from x import y` counts as `x.y`
    when `x.y` is a module, else `x`)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    type_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for n in ast.walk(block)
    }
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "einc")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "einc":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                is_module = (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").exists() or (
                    PACKAGE.parent / sub.replace(".", "/") / "__init__.py"
                ).exists()
                found.add(sub if is_module else target)
    return found


def upward_edges() -> set[tuple[str, str]]:
    edges = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        for target in imports(path):
            if floor(target) > floor(source):
                edges.add((source, target))
    return edges


def test_no_new_upward_imports() -> None:
    new = sorted(upward_edges() - set(KNOWN))
    assert not new, "upward imports (a lower floor importing a higher one):\n" + "\n".join(
        f"  {a} -> {b}  (floor {floor(a)} -> {floor(b)})" for a, b in new
    )


def test_known_upward_imports_still_exist() -> None:
    stale = sorted(set(KNOWN) - upward_edges())
    assert not stale, f"removed upward imports: delete them from KNOWN: {stale}"


@pytest.mark.parametrize(
    "source, target, upward",
    [
        ("einc.runtime.signature", "einc.passes.convert_ein_to_affine", True),
        ("einc.targets.descriptions", "einc.frontend.checked", True),
        ("einc.compiler.driver", "einc.targets", False),
        ("einc.transforms.gpu_mapping", "einc.ir.attrs", False),
    ],
)
def test_floor_order(source: str, target: str, upward: bool) -> None:
    """The order itself: the edges the architecture review named are upward, ordinary ones not."""
    assert (floor(target) > floor(source)) is upward


def test_relative_and_lazy_imports_are_seen(tmp_path: Path) -> None:
    """A lazy, in-function import counts like a top-level one."""
    lazy = [p for p in PACKAGE.rglob("*.py") if "def " in p.read_text()]
    assert any(
        isinstance(n, ast.ImportFrom) and n.col_offset > 0
        for p in lazy
        for n in ast.walk(ast.parse(p.read_text()))
    )
    assert "einc.frontend.checked" in imports(PACKAGE / "frontend" / "target_check.py")
    assert "einc.runtime.c" in imports(PACKAGE / "targets" / "clike.py")  # inside a method
