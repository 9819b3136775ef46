"""keyshared's Sarama and kafka-go partitioners against the Go clients themselves: Sarama's
``HashPartitioner`` and kafka-go's ``Hash`` balancer, built from the Go module proxy
(``tests/go_partitioners``) and fed keys in bulk, 120,000 from a drawn seed per partition
count (unicode, arbitrary bytes and empty keys). Null keys are left out: both clients pick
a partition for them by round robin or at random, where keyshared names none.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.keys import bulk_keys
from support.pulsar_oracle import record

from keyshared.routing import Partitioner, partitions

MODULE = Path(__file__).parent / "go_partitioners"
BULK_KEYS = 120_000
# kafka-go's balancer takes the list of partitions itself, so counts stay modest.
COUNTS = [1, 2, 7, 12, 1000]


@pytest.fixture(scope="module")
def go_partitioners(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    assert go, "the Go toolchain is missing: scripts/setup.sh installs it"
    binary = tmp_path_factory.mktemp("go") / "go_partitioners"
    subprocess.run(
        [go, "build", "-mod=readonly", "-o", str(binary), "."],
        cwd=MODULE,
        check=True,
        timeout=600,
    )
    return binary


def go_partitions(binary: Path, keys: Sequence[bytes], n: int) -> tuple[list[int], list[int]]:
    """Sarama's and kafka-go's partition of each key."""
    lines = subprocess.run(
        [str(binary), str(n)],
        input="".join(k.hex() + "\n" for k in keys),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.split("\n")[:-1]
    pairs = [line.split() for line in lines]
    assert len(pairs) == len(keys)
    return [int(s) for s, _ in pairs], [int(g) for _, g in pairs]


def compare(binary: Path, keys: Sequence[str | bytes], n: int) -> None:
    raw = [k.encode() if isinstance(k, str) else k for k in keys]
    want = dict(zip(("sarama", "kafka-go"), go_partitions(binary, raw, n), strict=True))
    for name, real in want.items():
        ours = partitions(keys, n, Partitioner(name)).tolist()
        differ = sum(a != b for a, b in zip(ours, real, strict=True))
        record(f"go {name}", len(keys), differ)
        assert differ == 0, f"{name}: {differ} of {len(keys)} keys differ at n={n}"


@pytest.mark.parametrize("n", COUNTS)
def test_bulk_keys(go_partitioners: Path, n: int) -> None:
    keys = [k for k in bulk_keys(n, BULK_KEYS) if k is not None]
    compare(go_partitioners, keys, n)


@settings(max_examples=30, deadline=None)
@given(
    keys=st.lists(
        st.one_of(st.text(st.characters(exclude_categories=["Cs"])), st.binary()), max_size=50
    ),
    n=st.integers(1, 5000),
)
def test_drawn_keys(go_partitioners: Path, keys: list[str | bytes], n: int) -> None:
    compare(go_partitioners, keys, n)
