"""The native module's docs are written once, in the stub ``keyshared/_core.pyi``: the bindings
take each docstring from it at build time (rust/bindings/build.rs and ``stub_doc!``), so every
public item of ``keyshared._core`` carries at runtime exactly the docstring the stub gives it,
and the stub documents every public item."""

import ast
import inspect
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from keyshared import _core

STUB = Path(_core.__file__).with_name("_core.pyi")
STUB_DOCS = Path(__file__).resolve().parents[2] / "rust" / "bindings" / "stub_docs.rs"


def _attribute_name(node: ast.stmt) -> str | None:
    target: ast.expr | None = None
    if isinstance(node, ast.AnnAssign):
        target = node.target
    elif isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
    return target.id if isinstance(target, ast.Name) else None


def _stub_items() -> dict[str, str | None]:
    """Every item the stub declares (``name`` or ``Class.name``), with its docstring as
    ``inspect.cleandoc`` cleans it; ``_core`` is the module."""
    tree = ast.parse(STUB.read_text())
    items: dict[str, str | None] = {"_core": ast.get_docstring(tree)}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for i, node in enumerate(body):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                items[prefix + node.name] = ast.get_docstring(node)
                if isinstance(node, ast.ClassDef):
                    visit(node.body, f"{prefix}{node.name}.")
            elif (name := _attribute_name(node)) is not None:
                after = body[i + 1] if i + 1 < len(body) else None
                literal = after.value if isinstance(after, ast.Expr) else None
                value = literal.value if isinstance(literal, ast.Constant) else None
                items[prefix + name] = inspect.cleandoc(value) if isinstance(value, str) else None

    visit(tree.body, "")
    return items


STUB_ITEMS = _stub_items()


def _is_public(item: str) -> bool:
    return item == "_core" or not any(part.startswith("_") for part in item.split("."))


def _runtime_doc(obj: Any) -> str | None:
    """``obj.__doc__`` without a text signature (``name(...)\\n--\\n\\n``) in front, should
    the interpreter have left one there."""
    doc = obj.__doc__
    if isinstance(doc, str) and "\n--\n\n" in doc and doc.split("\n", 1)[0].endswith(")"):
        doc = doc.split("\n--\n\n", 1)[1]
    return doc or None


def _runtime_items() -> dict[str, Any]:
    """Every public function, class, method and property of the native module, by item;
    class attributes that are plain values (no docstring of their own) left out."""
    found: dict[str, Any] = {"_core": _core}
    for name in sorted(vars(_core)):
        obj = getattr(_core, name)
        if name.startswith("_") or not (inspect.isclass(obj) or callable(obj)):
            continue
        found[name] = obj
        if not inspect.isclass(obj) or issubclass(obj, BaseException):
            continue
        for member, raw in vars(obj).items():
            if member.startswith("_"):
                continue
            value = getattr(obj, member)
            if inspect.isdatadescriptor(raw) or callable(value):
                found[f"{name}.{member}"] = raw if inspect.isdatadescriptor(raw) else value
    return found


RUNTIME_ITEMS = _runtime_items()
ITEMS = sorted(RUNTIME_ITEMS)


@pytest.mark.parametrize("item", ITEMS)
def test_the_runtime_docstring_is_the_stubs(item: str) -> None:
    assert item in STUB_ITEMS, f"the stub does not declare {item}"
    # The docstrings are copied in at build time: after an edit of the stub, scripts/setup.sh
    # rebuilds the module.
    assert _runtime_doc(RUNTIME_ITEMS[item]) == STUB_ITEMS[item], (
        "is the module built from this stub?"
    )


def test_every_public_item_of_the_stub_has_a_docstring() -> None:
    bare = [item for item, doc in STUB_ITEMS.items() if _is_public(item) and not doc]
    assert bare == []


def test_the_comparison_covers_every_native_item() -> None:
    # Guards the comparison above against a runtime listing that quietly finds nothing.
    assert len(ITEMS) >= 270


def _stub_parameters() -> dict[str, list[str]]:
    """The parameter names of every function and method the stub declares, by item; a
    class's are its ``__new__``'s without ``cls``."""
    found: dict[str, list[str]] = {}

    def names(f: ast.FunctionDef) -> list[str]:
        a = f.args
        every = [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs]
        return [p.arg for p in [*every, *([a.kwarg] if a.kwarg else [])]]

    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = names(node)
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    found[f"{node.name}.{member.name}"] = names(member)
                    if member.name == "__new__":
                        found[node.name] = names(member)[1:]
    return found


STUB_PARAMETERS = _stub_parameters()
SIGNED = [i for i in ITEMS if i in STUB_PARAMETERS and callable(RUNTIME_ITEMS[i])]


@pytest.mark.parametrize("item", SIGNED)
def test_the_text_signature_survives_the_docstring(item: str) -> None:
    # The signature PyO3 puts in front of the docstring becomes `__text_signature__`; were
    # it lost or garbled, inspect.signature would raise or name other parameters.
    signature = inspect.signature(RUNTIME_ITEMS[item])
    assert list(signature.parameters) == STUB_PARAMETERS[item]


# --- the build script ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def build_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs half of rust/bindings/build.rs (stub_docs.rs, plain Rust with no
    dependencies) compiled alone, with a main that calls it as build.rs does."""
    rustc = shutil.which("rustc")
    assert rustc is not None, "rustc is needed to build the native module"
    folder = tmp_path_factory.mktemp("build-script")
    main = folder / "main.rs"
    main.write_text(
        f'#[path = r#"{STUB_DOCS}"#]\nmod stub_docs;\n\nfn main() {{\n    stub_docs::write();\n}}\n'
    )
    out = folder / "build-script"
    subprocess.run(
        [rustc, "--edition=2021", "-O", "-o", out, main], check=True, capture_output=True
    )
    return out


def _fake_crate(root: Path, stub: str, source: str) -> Path:
    """A tree laid out as the repository is: the stub and one binding source."""
    crate = root / "rust" / "bindings"
    (crate / "src").mkdir(parents=True)
    (crate / "src" / "lib.rs").write_text(source)
    (root / "python" / "keyshared").mkdir(parents=True)
    (root / "python" / "keyshared" / "_core.pyi").write_text(stub)
    return crate


def _run(script: Path, crate: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CARGO_MANIFEST_DIR": str(crate), "OUT_DIR": str(out)}
    return subprocess.run([script], env=env, capture_output=True, text=True)


def test_the_build_script_reads_every_docstring_as_python_does(
    build_script: Path, tmp_path: Path
) -> None:
    crate = _fake_crate(tmp_path, STUB.read_text(), "")
    done = _run(build_script, crate, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    written = {p.stem: p.read_text() for p in (tmp_path / "out" / "stub_docs").iterdir()}
    assert written == {item: doc for item, doc in STUB_ITEMS.items() if doc is not None}


def test_the_build_fails_naming_a_docstring_the_stub_lacks(
    build_script: Path, tmp_path: Path
) -> None:
    stub = 'def documented() -> None:\n    """Here."""\n\ndef bare() -> None: ...\n'
    source = '#[doc = stub_doc!("documented")]\nfn a() {}\n#[doc = stub_doc!("bare")]\nfn b() {}\n'
    crate = _fake_crate(tmp_path, stub, source)
    done = _run(build_script, crate, tmp_path / "out")
    assert done.returncode != 0
    assert 'stub_doc!("bare")' in done.stderr
    assert "no docstring for `bare`" in done.stderr
    assert "documented" not in done.stderr
    assert str(crate / "src" / "lib.rs") in done.stderr
