"""The public API does not change by accident (docs/versioning.md).

- ``api/current.txt`` lists every public name of every public module, with its kind and
  signature: a change to the API fails here until the listing is updated with it
  (``python tests/package/test_public_api.py`` rewrites it), so the change shows in review.
- ``api/<release>.txt`` lists the names of the last release. Each must still be there, or
  reachable from its old place with a ``DeprecationWarning`` naming the new one, or named in
  the CHANGELOG's Unreleased "Removed" section.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

API = Path(__file__).parent / "api"
CURRENT = API / "current.txt"
LAST_RELEASE = API / "0.1.0.txt"
CHANGELOG = Path(__file__).parents[2] / "CHANGELOG.md"
MODULES = [
    "keyshared",
    "keyshared.routing",
    "keyshared.scalable",
    "keyshared.dispatch",
    "keyshared.explain",
    "keyshared.loadbalance",
    "keyshared.simulate",
    "keyshared.errors",
    "keyshared.versions",
    "keyshared.connection",
    "keyshared.verify",
]


def signature(obj: object) -> str:
    try:
        text = str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    # Defaults whose repr names a memory address say nothing about the API.
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def kind(obj: object) -> str:
    if isinstance(obj, ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return f"constant {type(obj).__name__}"


def members(cls: type) -> list[str]:
    return sorted(n for n in vars(cls) if not n.startswith("_") or n == "__init__")


def listing() -> list[str]:
    lines = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in sorted(module.__all__):
            obj = getattr(module, name)
            path = f"{module_name}.{name}"
            lines.append(f"{path}: {kind(obj)}{signature(obj) if kind(obj) != 'module' else ''}")
            if inspect.isclass(obj):
                lines += [
                    f"{path}.{m}: {kind(getattr(obj, m))}{signature(getattr(obj, m))}"
                    for m in members(obj)
                ]
    return lines


def test_the_public_api_is_as_listed() -> None:
    want = CURRENT.read_text(encoding="utf-8").splitlines()
    got = listing()
    diff = "\n".join(difflib.unified_diff(want, got, "api/current.txt", "the package", lineterm=""))
    assert got == want, (
        "the public API changed; if on purpose, run `python tests/package/test_public_api.py` "
        f"and say what changed in CHANGELOG.md:\n{diff}"
    )


def resolve(path: str) -> object:
    """The object at dotted `path`: the longest importable module, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


def unreleased_removals() -> str:
    text = CHANGELOG.read_text(encoding="utf-8")
    unreleased = text.split("\n## ", 2)[1]
    return "\n".join(part for part in unreleased.split("\n### ") if part.startswith("Removed"))


RELEASED = LAST_RELEASE.read_text(encoding="utf-8").split()


@pytest.mark.parametrize("path", RELEASED)
def test_a_released_name_is_kept_moved_or_said_removed(path: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            obj = resolve(path)
        except (ImportError, AttributeError):
            assert f"`{path}`" in unreleased_removals(), (
                f"{path} was in the last release and is gone: give it a deprecation alias "
                "(python/keyshared/_deprecated.py) or say so under Removed in CHANGELOG.md"
            )
            return
    moved = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    for warning in moved:
        new = re.search(r" moved to (\S+);", str(warning.message))
        assert new, str(warning.message)
        # The new place holds the same object.
        if str(warning.message).startswith(f"{path} ") and not isinstance(obj, ModuleType):
            assert resolve(new[1]) is obj


def test_an_old_name_warns_with_its_new_place() -> None:
    import keyshared as ks

    with pytest.warns(DeprecationWarning, match=r"keyshared\.segment_hash moved to keyshared\."):
        old = ks.segment_hash  # type: ignore[attr-defined]
    assert old is ks.routing.segment_hash
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        ks.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_importing_an_old_module_warns_at_the_import() -> None:
    # A fresh interpreter: this one may have imported the old module already.
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", "import keyshared.hashing"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "keyshared.hashing moved to keyshared.routing.hashing" in done.stderr
    assert 'File "<string>", line 1' in done.stderr


if __name__ == "__main__":
    CURRENT.write_text("\n".join(listing()) + "\n", encoding="utf-8")
    print(f"wrote {CURRENT}")
