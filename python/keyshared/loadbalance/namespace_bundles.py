"""A namespace's bundles: Pulsar's ``NamespaceBundles``, and the topic names it places.

The bundles of one namespace tile the ring between its partition boundaries: boundary
``i`` to boundary ``i + 1``, half-open except the last, which is closed. A topic goes to
the bundle whose range holds the hash of its full name (``persistent://tenant/ns/topic``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from keyshared._checks import check_int, check_name
from keyshared.errors import ArgumentTypeError, InvalidArgument, OutOfRange
from keyshared.loadbalance.bundles import (
    FULL_LOWER_BOUND,
    FULL_UPPER_BOUND,
    HashFunction,
    NamespaceBundle,
    split_bundles,
    topic_hash,
    topic_namespace,
)
from keyshared.loadbalance.model import DEFAULT_PULSAR_VERSION


@dataclass(frozen=True)
class NamespaceBundles:
    """The bundles of ``namespace`` between ascending ``partitions`` (ring hashes).

    Invariant: at least two boundaries, ascending, within ``[0, 0xFFFFFFFF]``. Only the last
    bundle may end at ``0xFFFFFFFF`` (it then holds that hash); ``(0xFFFFFFFF, 0xFFFFFFFF)``
    is the one-point bundle.
    """

    namespace: str
    partitions: tuple[int, ...] = (FULL_LOWER_BOUND, FULL_UPPER_BOUND)

    def __post_init__(self) -> None:
        check_name("namespace", self.namespace)
        if isinstance(self.partitions, str | bytes) or not isinstance(self.partitions, Iterable):
            raise ArgumentTypeError("partitions must be a sequence of int", argument="partitions")
        partitions = tuple(
            check_int(f"partitions[{i}]", p, minimum=FULL_LOWER_BOUND, maximum=FULL_UPPER_BOUND)
            for i, p in enumerate(self.partitions)
        )
        if len(partitions) < 2:
            raise InvalidArgument(
                f"partitions must hold at least 2 boundaries, got {len(partitions)}",
                argument="partitions",
            )
        for i in range(1, len(partitions) - 1):
            if partitions[i] <= partitions[i - 1] or partitions[i] == FULL_UPPER_BOUND:
                raise InvalidArgument(
                    f"partitions[{i}] must be above partitions[{i - 1}] and below "
                    f"0xffffffff, got 0x{partitions[i]:08x} after 0x{partitions[i - 1]:08x}",
                    argument="partitions",
                )
        object.__setattr__(self, "partitions", partitions)
        # Builds the last bundle, so that an empty last range is refused here.
        NamespaceBundle(partitions[-2], partitions[-1], self.namespace)

    @property
    def bundles(self) -> tuple[NamespaceBundle, ...]:
        """The bundles, in ring order."""
        return tuple(
            NamespaceBundle(self.partitions[i], self.partitions[i + 1], self.namespace)
            for i in range(len(self.partitions) - 1)
        )

    @property
    def full_bundle(self) -> NamespaceBundle:
        """The whole ring, ``[0x00000000, 0xFFFFFFFF]``."""
        return NamespaceBundle.full(self.namespace)

    def size(self) -> int:
        """How many bundles there are."""
        return len(self.partitions) - 1

    def get_bundle(self, hash_value: int) -> NamespaceBundle:
        """The bundle holding a ring hash; :class:`~keyshared.errors.OutOfRange` (an
        ``IndexError``) outside the boundaries.

        Pulsar's binary search also fails for a hash equal to the last boundary, which
        its closed last range does hold; here that hash finds the last bundle.
        """
        check_int("hash_value", hash_value, minimum=FULL_LOWER_BOUND, maximum=FULL_UPPER_BOUND)
        return self._bundle(hash_value, "hash_value", f"0x{hash_value:08x}")

    def _bundle(self, hash_value: int, argument: str, value: str) -> NamespaceBundle:
        """:meth:`get_bundle` of a checked hash; the error names ``argument`` and shows its
        ``value``."""
        index = bisect.bisect_right(self.partitions, hash_value) - 1
        if hash_value == self.partitions[-1] == FULL_UPPER_BOUND:
            index = self.size() - 1
        if not 0 <= index < self.size():
            raise OutOfRange(
                f"{argument} {value} is outside the bundles of {self.namespace} "
                f"[0x{self.partitions[0]:08x}, 0x{self.partitions[-1]:08x}]",
                argument=argument,
            )
        return self.bundles[index]

    def find_bundle(
        self,
        topic_name: str,
        hash_function: HashFunction = topic_hash,
        *,
        pulsar_version: str = DEFAULT_PULSAR_VERSION,
    ) -> NamespaceBundle:
        """The bundle of a topic of this namespace (``ValueError`` for another namespace;
        :class:`~keyshared.errors.OutOfRange`, an ``IndexError``, when its hash is outside the
        boundaries).

        The topic name is read as Pulsar ``pulsar_version`` reads it (see
        :func:`~keyshared.loadbalance.topic_namespace`): ``"4.2"``, the default, refuses v1
        names ``domain://tenant/cluster/ns/topic``; ``"4.0"`` finds their bundle among the
        bundles of the v1 namespace ``tenant/cluster/ns``, by the hash of the full name.
        """
        full_name, namespace = topic_namespace(topic_name, pulsar_version=pulsar_version)
        if namespace != self.namespace:
            raise InvalidArgument(
                f"topic_name {topic_name!r} is in namespace {namespace!r}, not {self.namespace!r}",
                argument="topic_name",
            )
        hash_value = check_int(
            f"the hash of {full_name!r}",
            hash_function(full_name),
            minimum=FULL_LOWER_BOUND,
            maximum=FULL_UPPER_BOUND,
        )
        return self._bundle(hash_value, "topic_name", f"{topic_name!r} (hash 0x{hash_value:08x})")

    def validate_bundle(self, bundle: NamespaceBundle) -> None:
        """Raise ``ValueError`` unless ``bundle`` is one of these bundles."""
        self._validate(bundle, "bundle")

    def _validate(self, bundle: NamespaceBundle, name: str) -> None:
        """:meth:`validate_bundle`, its errors naming the caller's argument ``name``."""
        if not isinstance(bundle, NamespaceBundle):
            raise ArgumentTypeError(
                f"bundle must be a NamespaceBundle, got {type(bundle).__name__}", argument=name
            )
        if bundle.namespace != self.namespace:
            raise InvalidArgument(
                f"bundle {bundle} is not of namespace {self.namespace!r}", argument=name
            )
        index = bisect.bisect_left(self.partitions, bundle.lower_endpoint)
        if index >= self.size() or self.partitions[index] != bundle.lower_endpoint:
            raise InvalidArgument(
                f"bundle {bundle.bundle_range} is not in the bundles list", argument=name
            )
        if self.partitions[index + 1] != bundle.upper_endpoint:
            raise InvalidArgument(
                f"bundle {bundle.bundle_range}: invalid upper boundary", argument=name
            )

    def boundaries(self) -> tuple[str, ...]:
        """The boundaries as Pulsar's ``BundlesData`` stores them (``"0x%08x"``)."""
        return tuple(f"0x{p:08x}" for p in self.partitions)

    def split_bundle(
        self,
        target_bundle: NamespaceBundle,
        num_bundles: int = 2,
        split_boundaries: Iterable[int] | None = None,
    ) -> tuple[NamespaceBundles, tuple[NamespaceBundle, ...]]:
        """Split one bundle (see :func:`split_bundles`): the new bundles, and its children.

        As Pulsar's ``NamespaceBundleFactory.splitBundles``; the bundle must be one of these.
        """
        self._validate(target_bundle, "target_bundle")
        children = split_bundles(target_bundle, num_bundles, split_boundaries)
        index = self.partitions.index(target_bundle.lower_endpoint)
        inner = tuple(child.lower_endpoint for child in children[1:])
        partitions = self.partitions[: index + 1] + inner + self.partitions[index + 1 :]
        return NamespaceBundles(self.namespace, partitions), children


__all__ = [
    "NamespaceBundles",
]
