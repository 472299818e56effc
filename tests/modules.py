"""Loading a script that is not a package module (benchmarks/*.py, examples/plugins/*.py) in
the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_module(path: Path, name: str | None = None) -> ModuleType:
    """The module of the file `path` (relative to the repository root, or absolute), executed
    once more and registered in sys.modules under `name` (its stem by default), where its
    dataclasses and pickles look their module up."""
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
