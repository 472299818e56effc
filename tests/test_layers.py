"""einc's rule book for imports. The package is a stack of folders, one concept each; a module
may import its own folder or any folder below it, never one above, and no import cycle may
form anywhere, inside a folder included. The floors, bottom to top:

    errors                     located errors (a module: the ground)
    ir                         attribute names, dtypes, locations
    dialects                   ein, egpu, einc's transform ops, the xDSL context
    frontend                   .ein / Antares IR -> checked program -> `ein` module
    transforms                 loop mechanics: analyses and rewrites returning Failure values
    runtime                    build, load and call compiled kernels per toolchain
    targets                    facts (limits, dtypes, families) and printers; the registry
    passes                     one ModulePass per file; pipeline texts
    perfmodel                  the device performance model: counts of lowered kernels, devices, roofline
    schedule                   scripts, the interpreter, the builder, checks, default policies
    semantics                  the NumPy reference and the IR interpreters
    compiler                   the pass registry, the driver, records, Kernel
    tune                       the auto-tuner
    tools                      the work of einc's commands: jobs, einc-opt's, serve, explain, numerics, reduce
    torch                      PyTorch custom ops
    cli, opt, einc             the console scripts and the public package (modules)

Every import counts: top-level, lazy (inside a function), relative; only imports under
`if TYPE_CHECKING:` are left out (they load nothing: annotations may name a higher floor's
types). Importing `a.b.c` runs `a/__init__.py` and `a/b/__init__.py` first, but that is
Python's package machinery, not an edge: a package's `__init__` importing its own modules
is not a cycle here. Also checked: einc/ holds at most four loose modules (LOOSE), and no
module outside targets/ and runtime/ compares a value with a target's name (a branch on
`"c"` or `"cuda"`: a fact of the target belongs on the target class)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "einc"

FLOORS: list[str] = [
    "einc.errors",
    "einc.ir",
    "einc.dialects",
    "einc.frontend",
    "einc.transforms",
    "einc.runtime",
    "einc.targets",
    "einc.passes",
    "einc.perfmodel",
    "einc.schedule",
    "einc.semantics",
    "einc.compiler",
    "einc.tune",
    "einc.tools",
    "einc.torch",
    "einc.cli",
    "einc.opt",
    "einc",
]
"""One name per floor, bottom to top: the folders, with einc/'s loose modules at the ground
(errors) and the top (the console scripts and the package itself)."""

LOOSE = {"__init__.py", "errors.py", "cli.py", "opt.py"}
"""The modules at the top of einc/ (everything else lives in a folder): the public package, the
located errors every layer raises, and the `einc` / `einc-opt` console scripts (pyproject.toml
names einc.cli:main and einc.opt:main)."""

NAME_BRANCHES_ALLOWED = ("einc.targets", "einc.runtime")
"""Where a module may compare a value with a target's name: the targets (the registry) and the
runtimes (a toolchain per target)."""


def floor(module: str) -> int:
    """The floor of `module`: its top-level folder's (or, for a loose module, its own)."""
    parts = module.split(".")
    name = ".".join(parts[:2]) if len(parts) > 1 else module
    assert name in FLOORS, f"module {module} is on no floor: add its folder to FLOORS"
    return FLOORS.index(name)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports(path: Path) -> set[str]:
    """Every einc module `path` imports (absolute names; `from x import y` counts as `x.y`
    when `x.y` is a module, else `x`), lazy imports included, `TYPE_CHECKING` ones not."""
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
                found.add(sub if _is_module(sub) else target)
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the einc modules it imports (itself left out)."""
    return {
        module_name(path): {t for t in imports(path) if t != module_name(path)}
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm): each is an
    import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def upward_edges() -> set[tuple[str, str]]:
    return {(a, b) for a, targets in graph().items() for b in targets if floor(b) > floor(a)}


def target_names() -> set[str]:
    from einc.targets import get_all_targets

    return set(get_all_targets())


def name_branches(source: str, names: set[str]) -> list[int]:
    """The lines of `source` comparing something with one of `names` (a string literal, alone
    or in a tuple, list or set: `target == "c"`, `t in ("cuda", "hip")`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            literals = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
            if any(isinstance(k, ast.Constant) and k.value in names for k in literals):
                lines.append(node.lineno)
                break
    return lines


# ---- the rules ---------------------------------------------------------------------------------


def test_every_folder_is_a_floor() -> None:
    """FLOORS names exactly einc/'s folders and loose modules, each once."""
    folders = {f"einc.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    loose = {"einc" if p.name == "__init__.py" else f"einc.{p.stem}" for p in PACKAGE.glob("*.py")}
    assert len(FLOORS) == len(set(FLOORS))
    assert set(FLOORS) == folders | loose


def test_at_most_four_loose_modules() -> None:
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose <= LOOSE, f"modules at the top of einc/ belong in a folder: {sorted(loose - LOOSE)}"
    assert len(LOOSE) <= 4


def test_no_upward_imports() -> None:
    """No module imports a floor above its own (lazy imports included)."""
    found = sorted(upward_edges())
    assert not found, "upward imports (a lower floor importing a higher one):\n" + "\n".join(
        f"  {a} -> {b}  ({FLOORS[floor(a)]} -> {FLOORS[floor(b)]})" for a, b in found
    )


def test_no_import_cycle() -> None:
    """No import cycle anywhere, inside a folder included (a cycle closed by an import inside
    a function counts: it is a knot all the same)."""
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(f"  {' <-> '.join(c)}" for c in found)


def test_no_target_name_branch_outside_targets_and_runtime() -> None:
    names = target_names()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if module.startswith(NAME_BRANCHES_ALLOWED):
            continue
        found += [f"{path.relative_to(PACKAGE.parent)}:{line}" for line in name_branches(path.read_text(), names)]
    assert not found, "comparisons with a target's name (make it a fact of the target class):\n  " + "\n  ".join(found)


# ---- the checks check --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, target, upward",
    [
        ("einc.runtime.signature", "einc.passes.convert_ein_to_affine", True),
        ("einc.transforms.staging", "einc.schedule.checks", True),
        ("einc.targets.c", "einc.schedule.policies.cpu", True),
        ("einc.frontend.target_check", "einc.targets", True),
        ("einc.compiler.driver", "einc.tune.records", True),
        ("einc.schedule.interpreter", "einc.compiler.registry", True),
        ("einc.passes.targeted", "einc.targets", False),
        ("einc.schedule.checks", "einc.dialects.einc_transform", False),
        ("einc.tools.jobs", "einc.compiler.driver", False),
        ("einc.opt", "einc.cli", False),
    ],
)
def test_floor_order(source: str, target: str, upward: bool) -> None:
    """The order itself: the edges the architecture review found running upward would be
    upward now, ordinary ones not."""
    assert (floor(target) > floor(source)) is upward


def test_relative_and_lazy_imports_are_seen() -> None:
    """A lazy, in-function import counts like a top-level one."""
    lazy = [p for p in PACKAGE.rglob("*.py") if "def " in p.read_text()]
    assert any(
        isinstance(n, ast.ImportFrom) and n.col_offset > 0
        for p in lazy
        for n in ast.walk(ast.parse(p.read_text()))
    )
    assert "einc.frontend.checked" in imports(PACKAGE / "frontend" / "target_check.py")
    assert "einc.runtime.c" in imports(PACKAGE / "targets" / "clike.py")  # inside a method


def test_cycles_are_found() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_name_branches_are_found() -> None:
    names = {"c", "cuda"}
    source = 'if target == "c":\n    pass\nx = t in ("cuda", "hip")\ny = device == "cpu"\nz = {"c": 1}\n'
    assert name_branches(source, names) == [1, 3]
