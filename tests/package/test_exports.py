"""The package's front door: every module says what it exports in ``__all__``, a concept
package exports its modules' names together, the root keeps the names a user starts from, and
every native name has one public home."""

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import keyshared
from keyshared import _core

#: The concept packages; each exports its modules' names together.
CONCEPTS = ("routing", "scalable", "dispatch", "explain", "loadbalance", "simulate")

#: What the root may hold at most (issue: "about 40").
ROOT_LIMIT = 60


def public_modules() -> list[ModuleType]:
    """Every module of the package whose name has no part starting with ``_``."""
    found = [keyshared]
    for info in pkgutil.walk_packages(keyshared.__path__, "keyshared."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(importlib.import_module(info.name))
    return found


MODULES = public_modules()


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_module_lists_what_it_exports(module: ModuleType) -> None:
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module.__name__} has no __all__"
    assert len(exported) == len(set(exported)), f"{module.__name__}.__all__ repeats a name"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{module.__name__}.__all__ names what it lacks: {missing}"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_function_and_class_a_module_defines_is_exported(module: ModuleType) -> None:
    defined = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module.__name__
    }
    # A helper the module keeps to itself is named with a leading underscore.
    private = defined - set(module.__all__)
    assert not private, f"{module.__name__} defines {sorted(private)} outside __all__"


#: Modules a concept package does not re-export: commands, their text, pictures, and the simulator's
#: parts (``keyshared.simulate`` exports what a scenario's author uses).
SEPARATE = {"keyshared.explain.command", "keyshared.explain.plot", "keyshared.explain.report"}
REEXPORTING = ("routing", "scalable", "dispatch", "explain", "loadbalance")


@pytest.mark.parametrize("name", REEXPORTING)
def test_a_concept_package_exports_each_of_its_modules(name: str) -> None:
    package = importlib.import_module(f"keyshared.{name}")
    exported = set(package.__all__)
    for module in MODULES:
        if module.__name__.startswith(f"{package.__name__}.") and module.__name__.count(".") == 2:
            if module.__name__ in SEPARATE:
                continue
            assert set(module.__all__) <= exported, (
                f"{package.__name__} leaves out {sorted(set(module.__all__) - exported)} "
                f"of {module.__name__}"
            )


def test_the_root_holds_the_names_a_user_starts_from() -> None:
    names = [n for n in keyshared.__all__ if not inspect.ismodule(getattr(keyshared, n))]
    assert 30 <= len(names) <= ROOT_LIMIT
    homes = {c: importlib.import_module(f"keyshared.{c}").__all__ for c in CONCEPTS}
    for name in names:
        if name == "__version__":
            continue
        owners = [c for c, exported in homes.items() if name in exported]
        assert owners, f"keyshared.{name} has no concept package"
        home = importlib.import_module(f"keyshared.{owners[0]}")
        assert getattr(keyshared, name) is getattr(home, name)


def test_every_native_name_has_one_public_home() -> None:
    native = {n for n in dir(_core) if not n.startswith("_")}
    homes: dict[str, list[str]] = {}
    for module in MODULES:
        if module.__name__.count(".") != 1 or module.__name__ == "keyshared":
            continue
        for name in module.__all__:
            if name in native and getattr(module, name) is getattr(_core, name):
                homes.setdefault(name, []).append(module.__name__)
    unexported = native - set(homes) - INTERNAL_NATIVE
    assert not unexported, f"native names no concept package exports: {sorted(unexported)}"
    shared = {n: m for n, m in homes.items() if len(m) > 1}
    assert not shared, f"native names exported by more than one concept package: {shared}"


#: Native helpers the Python layers wrap rather than export.
INTERNAL_NATIVE = {"java_string_hash_code", "java_utf8", "partition_key", "partition_keys"}


def test_the_concept_packages_are_reachable_from_the_root() -> None:
    for name in ("routing", "scalable", "dispatch", "explain", "errors", "versions"):
        assert inspect.ismodule(getattr(keyshared, name))
