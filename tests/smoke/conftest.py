"""The wheel as a user installs it: from an index, with no Rust toolchain on the machine."""

import shutil
import sys
from pathlib import Path

import pytest

import keyshared


def pytest_configure(config: pytest.Config) -> None:
    # The suite proves nothing if it imports the development build or could have built one.
    installed = Path(keyshared.__file__).resolve()
    if not installed.is_relative_to(Path(sys.prefix).resolve()):
        raise pytest.UsageError(f"keyshared comes from {installed}, not from {sys.prefix}")
    if shutil.which("cargo") is not None or shutil.which("rustc") is not None:
        raise pytest.UsageError("cargo or rustc is on PATH: the wheel must install without them")
