"""Release profiles: the Pulsar releases whose behaviour keyshared can reproduce, by the
``pulsar_version`` argument, and which of them each part of the library accepts.

keyshared follows Pulsar's master branch; a release profile reproduces an older release
where its answers differ. The spellings are the same everywhere:

* ``"master"``: Pulsar's master branch (the default of the scalable-topic functions);
* ``"5.0.0-M1"``: the first 5.0 milestone, whose scalable topics predate PIP-486;
* ``"4.2"`` and ``"4.0"``: the 4.2 line and the 4.0 LTS line (no scalable topics).

Each part checks its argument with its own :class:`Releases`: the scalable-topic functions
(:data:`SCALABLE_TOPICS`) and the load balancer (:data:`LOAD_BALANCER`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from keyshared.errors import ArgumentTypeError, InvalidArgument

MASTER = "master"
M1 = "5.0.0-M1"

#: Every release keyshared knows, newest first.
KNOWN_RELEASES = (MASTER, M1, "4.2", "4.0")


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(map(repr, values))


@dataclass(frozen=True)
class Releases:
    """The releases one part of the library reproduces: ``accepted`` (in the order its
    messages list them), ``default``, and ``refusal``, the reason a known release outside
    ``accepted`` is refused (None: refused as any other string is)."""

    accepted: tuple[str, ...]
    default: str
    refusal: str | None = None

    def check(self, value: object, name: str = "pulsar_version") -> str:
        """``value`` if it is an accepted release; TypeError for a non-``str``, ValueError
        naming ``name`` otherwise."""
        if not isinstance(value, str):
            raise ArgumentTypeError(
                f"{name} must be a str, got {type(value).__name__}", argument=name
            )
        if value in self.accepted:
            return value
        if self.refusal is not None and value in KNOWN_RELEASES:
            raise InvalidArgument(
                f"{name} {value!r}: {self.refusal} ({_quoted(self.accepted)})", argument=name
            )
        raise InvalidArgument(
            f"{name} must be one of {_quoted(self.accepted)}, got {value!r}", argument=name
        )


#: Scalable topics (layouts, routing tables, the segment router, the batcher, the CLI and
#: Spark's ``ks_route``): master (PIP-486) and 5.0.0-M1.
SCALABLE_TOPICS = Releases(
    accepted=(MASTER, M1),
    default=MASTER,
    refusal="scalable topics need Pulsar 5.0, one of",
)

#: The load balancer's policies: ``"4.2"`` (the default: Pulsar 4.2 and master, which agree
#: there) and ``"4.0"`` (the 4.0 LTS line, as released up to 4.0.7).
LOAD_BALANCER = Releases(accepted=("4.0", "4.2"), default="4.2")


def segment_half(pulsar_version: object, name: str = "pulsar_version") -> str:
    """Which half of a key's 32-bit hash picks its segment under ``pulsar_version``:
    ``"high"`` on master (PIP-486, the low half being the entry-bucket hash hashB) or
    ``"low"`` on 5.0.0-M1 (``makeHash(key) & 0xFFFF``; M1 has no entry buckets, so every
    key is in its segment's one bucket, bucket 0). The native routing table takes its rule
    from here."""
    return "low" if SCALABLE_TOPICS.check(pulsar_version, name) == M1 else "high"


_VERSION = re.compile(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?(-M\d+)?")


def nearest_release(version: str) -> tuple[str, str | None]:
    """The release profile for a broker that reports ``version`` (``/admin/v2/brokers/version``:
    ``"4.2.4"``, ``"5.0.0-M1"``, a fork's ``"3.0.5.1-ds"``), and None, or a note when the
    profile is only the nearest: keyshared has no profile for that release, and says which
    it checks against instead. Releases after the newest profile are checked as master."""
    found = _VERSION.match(version)
    if found is None:
        return (
            MASTER,
            f"Pulsar {version!r} is not a version keyshared can read; checking as {MASTER}",
        )
    major, minor = int(found[1]), int(found[2])
    if (major, minor) == (5, 0) and found[4] == "-M1":
        return M1, None
    for release in ("4.0", "4.2"):
        if f"{major}.{minor}" == release:
            return release, None
    if (major, minor) < (4, 0):
        return "4.0", (
            f"keyshared has no profile for Pulsar {version}; checking against 4.0, the nearest"
            " (releases before 4.0 lack PIP-379's draining hashes, so their Key_Shared"
            " dispatcher holds messages differently)"
        )
    if (major, minor) < (4, 2):
        return (
            "4.2",
            f"keyshared has no profile for Pulsar {version}; checking against 4.2, the nearest",
        )
    return (
        MASTER,
        f"keyshared has no profile for Pulsar {version}; checking against {MASTER}, the nearest",
    )


__all__ = [
    "KNOWN_RELEASES",
    "LOAD_BALANCER",
    "M1",
    "MASTER",
    "SCALABLE_TOPICS",
    "Releases",
    "nearest_release",
    "segment_half",
]
