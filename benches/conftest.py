"""Shared benchmark data: the same keys for every library in a group."""

import random

import pyarrow as pa
import pytest

from keyshared import _core


def pytest_configure(config: pytest.Config) -> None:
    if _core.__build_profile__ != "release":
        raise pytest.UsageError(
            f"benchmarks need a release build, this is a {_core.__build_profile__} build: "
            "run scripts/bench.sh (or KEYSHARED_BUILD=release scripts/setup.sh) first"
        )


N_KEYS = 1_000_000


def make_keys(n: int, seed: int = 7) -> list[str]:
    """n distinct keys of 20 to 30 ASCII bytes, like order or device ids."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return [f"{i:08d}-" + "".join(rng.choices(alphabet, k=rng.randint(11, 21))) for i in range(n)]


@pytest.fixture(scope="session")
def key_list() -> list[str]:
    return make_keys(N_KEYS)


@pytest.fixture(scope="session")
def key_arrow(key_list: list[str]) -> pa.Array:
    return pa.array(key_list, type=pa.string())
