"""The names and modules of the last release (0.1.0) that have moved since, still importable
from their old places for one more release. Each use warns with a ``DeprecationWarning`` that
names the new place (docs/versioning.md says how long an alias lives)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from pathlib import Path
from types import ModuleType

_PACKAGE = Path(__file__).parent

_ROUTING = (
    "bucket_hash bucket_indices bucket_ranges buckets_for_budget canonical_bucket_hash "
    "entry_bucket equal_width_splits get_num_threads segment_hash"
)
_SCALABLE = (
    "AutoScalePolicyEvaluator AutoScalePolicyOverride BalancedSplits BucketAssignment "
    "BucketConsumer BucketHandoff BucketMove DecisionSnapshot EntryBatch LastOperationTimes "
    "Merge NoAction Rebucket SegmentLoadSample SegmentLoadStats Split balanced_splits "
    "bucket_loads contiguous_assignment format_descriptor hash_b_histogram is_material_change "
    "last_operation_times lost_buckets moved_buckets parse_descriptor route_entries route_entry "
    "skew sticky_assignment"
)
_DISPATCH = (
    "BucketCheckpoints ConsumerDrainingHashesStats DrainingHash DrainingHashEntry InFlightEntry "
    "KeySharedConsumerState SubscriptionFailurePolicy WindowAction"
)

#: Names the package root exported in 0.1.0 -> the package that exports each now.
MOVED_NAMES: dict[str, str] = {
    **dict.fromkeys(_ROUTING.split(), "keyshared.routing"),
    **dict.fromkeys(_SCALABLE.split(), "keyshared.scalable"),
    **dict.fromkeys(_DISPATCH.split(), "keyshared.dispatch"),
}

#: Modules of 0.1.0 -> the module that holds their names now.
MOVED_MODULES: dict[str, str] = {
    "keyshared.balancing": "keyshared.scalable.balancing",
    "keyshared.batching": "keyshared.scalable.batching",
    "keyshared.buckets": "keyshared.routing",
    "keyshared.cursor": "keyshared.dispatch",
    "keyshared.draining": "keyshared.dispatch.draining",
    "keyshared.hashing": "keyshared.routing.hashing",
    "keyshared.layout": "keyshared.scalable.layout",
    "keyshared.ownership": "keyshared.scalable.ownership",
    "keyshared.policy": "keyshared.scalable.policy",
    "keyshared.rings": "keyshared.dispatch",
    "keyshared.window": "keyshared.dispatch",
}


def _warn(old: str, new: str, stacklevel: int) -> None:
    """Warns, pointing at the caller `stacklevel` frames up from the caller of `_warn`."""
    warnings.warn(
        f"{old} moved to {new}; the old name goes in the next release",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def moved_name(name: str) -> object:
    """The package root's 0.1.0 name `name` (a name or a module) from its new place, with a
    warning; AttributeError for a name the root never had."""
    module = f"keyshared.{name}"
    if module in MOVED_MODULES:
        return importlib.import_module(module)
    if name not in MOVED_NAMES:
        raise AttributeError(f"module 'keyshared' has no attribute {name!r}")
    new = MOVED_NAMES[name]
    # Past this function and the package's __getattr__.
    _warn(f"keyshared.{name}", f"{new}.{name}", 3)
    return getattr(importlib.import_module(new), name)


class MovedModule(ModuleType):
    """A 0.1.0 module: each name read from it comes from the module it moved to."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(old)
        self.__moved_to = new

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        # A few names of an old module went to the package beside its new module
        # (keyshared.draining.StickyKeyDispatcher is keyshared.dispatch's now).
        for place in (self.__moved_to, self.__moved_to.rpartition(".")[0]):
            module = importlib.import_module(place)
            if hasattr(module, name):
                _warn(f"{self.__name__}.{name}", f"{place}.{name}", 2)
                return getattr(module, name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a 0.1.0 module's path as its MovedModule; consulted only where no file is."""

    def find_spec(
        self,
        fullname: str,
        path: object = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return MovedModule(spec.name, MOVED_MODULES[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        _warn(module.__name__, MOVED_MODULES[module.__name__], _frames_to_importer())


def _frames_to_importer() -> int:
    """The warning's stack level for exec_module: the import statement, past importlib's
    frames and the package's own (an old module read as an attribute of the package root).
    The warnings module itself skips importlib's bootstrap frames: they count for nothing."""
    frame, level = sys._getframe(2), 2
    while frame.f_back is not None:
        name = frame.f_code.co_filename
        internal = name.startswith("<frozen importlib")
        if not (internal or name == importlib.__file__ or Path(name).parent == _PACKAGE):
            break
        level += not internal
        frame = frame.f_back
    return level


def install() -> None:
    """Makes the 0.1.0 module paths importable; once per process."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
