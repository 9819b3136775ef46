"""Shared benchmark data: the same keys for every library in a group, and the JVM that runs
the other systems' partitioners."""

import random
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest
from jvm import Jvm, Loop, warmed

import keyshared as ks
from keyshared import _core


def pytest_configure(config: pytest.Config) -> None:
    if _core.__build_profile__ != "release":
        raise pytest.UsageError(
            f"benchmarks need a release build, this is a {_core.__build_profile__} build: "
            "run scripts/bench.sh (or KEYSHARED_BUILD=release scripts/setup.sh) first"
        )


N_KEYS = 1_000_000
#: The length of every key of `fixed_keys`.
KEY_BYTES = 23


def make_keys(n: int, seed: int = 7) -> list[str]:
    """n distinct keys of 20 to 30 ASCII bytes, like order or device ids."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return [f"{i:08d}-" + "".join(rng.choices(alphabet, k=rng.randint(11, 21))) for i in range(n)]


def make_fixed_keys(n: int, length: int = KEY_BYTES, seed: int = 7) -> list[str]:
    """n distinct ASCII keys of `length` bytes each: an 8-digit serial, a dash, then random
    letters and digits."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return [f"{i:08d}-" + "".join(rng.choices(alphabet, k=length - 9)) for i in range(n)]


@pytest.fixture
def one_thread() -> Iterator[None]:
    """keyshared's batch calls on one thread for the test, as the groups that compare one core
    with one core need."""
    before = ks.routing.get_num_threads()
    ks.set_num_threads(1)
    yield
    ks.set_num_threads(before)


@pytest.fixture(scope="session")
def key_list() -> list[str]:
    return make_keys(N_KEYS)


@pytest.fixture(scope="session")
def key_arrow(key_list: list[str]) -> pa.Array:
    return pa.array(key_list, type=pa.string())


@pytest.fixture(scope="session")
def fixed_keys() -> list[str]:
    """1M keys of 23 bytes: what the groups that compare with the JVM hand every peer."""
    return make_fixed_keys(N_KEYS)


@pytest.fixture(scope="session")
def jvm() -> Iterator[Jvm]:
    """One oracle JVM for every group that needs one: it loads the keys once and warms each
    loop before timing it."""
    with Jvm() as running:
        yield running


@pytest.fixture(scope="session")
def jvm_keys(jvm: Jvm, fixed_keys: list[str]) -> int:
    """The handle of `fixed_keys` in the JVM, as UTF-8 bytes."""
    return jvm.load([k.encode() for k in fixed_keys])


@pytest.fixture(scope="session")
def jvm_loop(jvm: Jvm, jvm_keys: int) -> Callable[..., Loop]:
    """``jvm_loop(task, **args)``: that task's loop over `fixed_keys` in the JVM (BenchOps.java
    lists the tasks), warmed at its first use and kept for the rest of the session."""
    made: dict[tuple[str, tuple[tuple[str, int], ...]], Loop] = {}

    def get(task: str, **args: int) -> Loop:
        key = (task, tuple(sorted(args.items())))
        if key not in made:
            made[key] = warmed(jvm, jvm_keys, task, **args)
        return made[key]

    return get
