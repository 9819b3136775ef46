"""The import map of each source tree, file by file: no file imports one that imports it back,
through any number of others, so that the kernels crate, the binding crate and the Python
package each stay in layers. A failure names every file caught in a cycle, with the path
that makes each import.

A Rust file imports what its ``use crate::…``, ``use super::…`` and ``use self::…`` name and
what its ``crate::…``, ``super::…`` and ``self::…`` paths in code reach (``super`` resolved by
the file's place and the inline ``mod`` it is in); an item maps to the file of its module.
``mod`` declarations are not imports. A Python file imports the package modules its
``import`` and ``from … import`` statements name, relative ones and those inside functions or
``TYPE_CHECKING`` blocks included (an import kept out of the way of a cycle is still one).
The files are read, never imported.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: A map of imports: each file to the files it imports, with the first path that makes each.
Graph = dict[str, dict[str, str]]

# --- Rust ---------------------------------------------------------------------------------

_RAW_STRING = re.compile(r'(?<![\w])b?r(#*)"')
_CHAR = re.compile(r"b?'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'\n])'")
_TOKEN = re.compile(
    r"""
    (?P<mod>\bmod\s+(?P<name>[A-Za-z_]\w*)\s*\{)
    | (?P<use>\buse\s+(?P<tree>[^;]*);)
    | (?P<path>(?<![\w:])(?:crate|super|self)(?:\s*::\s*[A-Za-z_]\w*)+)
    | (?P<open>\{)
    | (?P<close>\})
    """,
    re.VERBOSE,
)


def rust_code(text: str) -> str:
    """``text`` without comments, and with every string and char literal emptied, so that
    neither a brace nor a path inside one counts."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif raw := _RAW_STRING.match(text, i):
            end = text.find('"' + raw.group(1), raw.end())
            i = n if end < 0 else end + 1 + len(raw.group(1))
            out.append('""')
        elif text[i] == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif char := _CHAR.match(text, i):
            i = char.end()
            out.append("' '")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def use_paths(tree: str) -> Iterator[list[str]]:
    """The paths a use tree names (``a::{b, c::{d as e}}`` gives ``a::b`` and ``a::c::d``),
    each as its segments, a trailing ``self`` or ``*`` left off."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        path = re.sub(r"\s+as\s+\w+$", "", tree)
        segments = [s for s in re.split(r"\s*::\s*", path) if s]
        while segments and segments[-1] in ("self", "*"):
            segments.pop()
        if segments:
            yield segments
        return
    prefix = [s for s in re.split(r"\s*::\s*", tree[:brace].strip()) if s]
    parts, depth, start = [], 0, brace + 1
    for i in range(brace + 1, len(tree)):
        if tree[i] == "{":
            depth += 1
        elif tree[i] == "}" and depth:
            depth -= 1
        elif tree[i] in ",}" and not depth:
            parts.append(tree[start:i])
            start = i + 1
            if tree[i] == "}":
                break
    for part in parts:
        part = re.sub(r"\s+as\s+\w+$", "", part.strip())
        if part in ("self", "*"):
            if prefix:
                yield prefix
        elif part:
            yield from (prefix + sub for sub in use_paths(part))


def rust_module(path: Path, src: Path) -> tuple[str, ...]:
    """The module path of a file: ``lib.rs`` is the crate, ``a/mod.rs`` and ``a.rs`` are
    ``a``."""
    parts = path.relative_to(src).with_suffix("").parts
    return parts[:-1] if parts[-1] in ("lib", "main", "mod") else parts


def rust_graph(src: Path) -> Graph:
    files = {rust_module(p, src): p.relative_to(src).as_posix() for p in sorted(src.rglob("*.rs"))}

    def file_of(segments: list[str], here: tuple[str, ...]) -> str | None:
        """The file of the module that the path ``segments``, written in module ``here``,
        reaches; None for a path out of the crate."""
        head, *rest = segments
        if head == "crate":
            module: tuple[str, ...] = ()
        elif head == "self":
            module = here
        elif head == "super":
            module = here[:-1]
            while rest and rest[0] == "super":
                module, rest = module[:-1], rest[1:]
        else:
            return None
        full = module + tuple(rest)
        return next(files[full[:k]] for k in range(len(full), -1, -1) if full[:k] in files)

    graph: Graph = {}
    for module, name in files.items():
        edges = graph.setdefault(name, {})
        # The module each open brace is in: inline modules (`mod tests { … }`) push theirs.
        scopes = [module]
        for token in _TOKEN.finditer(rust_code((src / name).read_text())):
            if token["mod"]:
                scopes.append((*scopes[-1], token["name"]))
                continue
            if token["open"]:
                scopes.append(scopes[-1])
                continue
            if token["close"]:
                if len(scopes) > 1:
                    scopes.pop()
                continue
            paths = use_paths(token["tree"]) if token["use"] else [token["path"].split("::")]
            for segments in paths:
                segments = [s.strip() for s in segments]
                target = file_of(segments, scopes[-1])
                if target is not None and target != name:
                    edges.setdefault(target, "::".join(segments))
    return graph


# --- Python -------------------------------------------------------------------------------


def python_graph(package: Path) -> Graph:
    def module_name(path: Path) -> str:
        parts = path.relative_to(package.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    found = sorted(package.rglob("*.py")) + sorted(package.rglob("*.pyi"))
    modules: dict[str, str] = {}
    for path in found:
        # A stub stands for a module only where no source does (the compiled `_core`).
        modules.setdefault(module_name(path), path.relative_to(package).as_posix())

    graph: Graph = {}
    for name, file in modules.items():
        edges = graph.setdefault(file, {})
        is_package = file.endswith(("__init__.py", "__init__.pyi"))
        # What `from . import` starts from: the package itself, or the one the module is in.
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse((package / file).read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = ".".join(here[: len(here) - node.level + 1])
                    base = f"{up}.{base}" if base else up
                # A name imported from a package is its submodule where it has one of the name.
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                if target in modules and modules[target] != file:
                    edges.setdefault(modules[target], target)
    return graph


# --- Cycles -------------------------------------------------------------------------------


def cycles(graph: Graph) -> list[list[str]]:
    """One shortest cycle through each file that is on a cycle, each once, starting at its
    least file: every file caught in a cycle shows in one."""
    found: set[tuple[str, ...]] = set()
    for start in sorted(graph):
        # Breadth first from `start` back to it: the shortest way round.
        came_from: dict[str, str] = {}
        queue = deque([start])
        while queue and start not in came_from:
            at = queue.popleft()
            for nxt in sorted(graph.get(at, {})):
                if nxt not in came_from:
                    came_from[nxt] = at
                    queue.append(nxt)
        if start not in came_from:
            continue
        ring = [start]
        while came_from[ring[-1]] != start:
            ring.append(came_from[ring[-1]])
        ring.reverse()
        least = ring.index(min(ring))
        found.add(tuple(ring[least:] + ring[:least]))
    return [list(c) for c in sorted(found, key=lambda c: (len(c), c))]


def describe(graph: Graph, ring: list[str]) -> str:
    steps = zip(ring, ring[1:] + ring[:1], strict=True)
    return "\n".join(
        [" -> ".join([*ring, ring[0]])] + [f"    {a} imports {b} ({graph[a][b]})" for a, b in steps]
    )


TREES = {
    "rust/kernels/src": rust_graph,
    "rust/bindings/src": rust_graph,
    "python/keyshared": python_graph,
}


@pytest.mark.parametrize("tree", list(TREES))
def test_no_file_imports_one_that_imports_it_back(tree: str) -> None:
    graph = TREES[tree](ROOT / tree)
    assert any(graph.values()), f"no imports read in {tree}: the reader is broken"
    found = cycles(graph)
    assert not found, f"import cycles between the files of {tree}:\n" + "\n".join(
        describe(graph, ring) for ring in found
    )


def test_the_reader_sees_every_kind_of_rust_import(tmp_path: Path) -> None:
    for name, text in {
        "lib.rs": "pub mod a;\npub mod b;\npub mod c;\n",
        "a.rs": 'use super::b::{self as bee, X};\nconst S: &str = "crate::c::Nope";\n',
        "b.rs": "// use crate::c::Y;\nfn f() { crate::c::g(); }\n",
        "c/mod.rs": "pub mod d;\n#[cfg(test)]\nmod tests {\n    use super::super::a::Z;\n}\n",
        "c/d.rs": "use self::inner::W;\nmod inner { pub use super::super::e::V; }\n",
    }.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = rust_graph(tmp_path)
    assert graph == {
        "lib.rs": {},
        "a.rs": {"b.rs": "super::b"},
        "b.rs": {"c/mod.rs": "crate::c::g"},
        "c/mod.rs": {"a.rs": "super::super::a::Z"},
        "c/d.rs": {"c/mod.rs": "super::super::e::V"},
    }
    assert cycles(graph) == [["a.rs", "b.rs", "c/mod.rs"]]


def test_the_reader_sees_every_kind_of_python_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for name, text in {
        "__init__.py": "from pkg.sub import thing\n",
        "sub/__init__.py": "from .leaf import thing\n",
        "sub/leaf.py": "def f():\n    from .. import other\n",
        "other.py": "import pkg.sub.leaf as leaf\nfrom . import _native\n",
        "_native.pyi": "from typing import Any\n",
    }.items():
        (package / name).write_text(text)
    graph = python_graph(package)
    assert graph == {
        "__init__.py": {"sub/__init__.py": "pkg.sub"},
        "sub/__init__.py": {"sub/leaf.py": "pkg.sub.leaf"},
        "sub/leaf.py": {"other.py": "pkg.other"},
        "other.py": {"sub/leaf.py": "pkg.sub.leaf", "_native.pyi": "pkg._native"},
        "_native.pyi": {},
    }
    assert cycles(graph) == [["other.py", "sub/leaf.py"]]
