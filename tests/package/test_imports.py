"""The package's import graph: no module imports itself back through others, so each can be
imported alone and read without the rest."""

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import keyshared

PACKAGE = Path(keyshared.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """The package modules ``path`` imports at module level, TYPE_CHECKING blocks included
    (an import kept out of the running program to dodge a cycle is still a cycle)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        for sub in ast.walk(node) if isinstance(node, ast.If) else [node]:
            if isinstance(sub, ast.ImportFrom) and sub.module:
                names = [f"{sub.module}.{a.name}" for a in sub.names] + [sub.module]
            elif isinstance(sub, ast.Import):
                names = [a.name for a in sub.names]
            else:
                continue
            found.update(n for n in names if n in MODULES)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    graph = {
        name: {m for m in imported_modules(path) if m != name} for name, path in MODULES.items()
    }
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("keyshared.simulate")))
def test_each_simulator_module_imports_alone(name: str) -> None:
    done = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
