"""Each folder of tests/ holds one kind of test; its conftest marks every test in it."""

from collections.abc import Callable
from pathlib import Path

import pytest


def mark_folder(
    conftest: str, *markers: pytest.MarkDecorator
) -> Callable[[list[pytest.Item]], None]:
    """The ``pytest_collection_modifyitems`` hook of the folder holding ``conftest``: it adds
    ``markers`` to the tests collected there (the hook sees the whole session's tests)."""
    folder = Path(conftest).resolve().parent

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
        for item in items:
            if folder in item.path.resolve().parents:
                for marker in markers:
                    item.add_marker(marker)

    return pytest_collection_modifyitems
