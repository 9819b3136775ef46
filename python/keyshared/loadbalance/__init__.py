"""Apache Pulsar's load-balancer policies as pure functions (SPEC section 9).

Bundle split algorithms over the 32-bit bundle ring (:mod:`.bundles`), a namespace's
bundles (:mod:`.namespace_bundles`), and the shedding
strategies of the modular load manager (:mod:`.shedders`) and of the extensible one
(:mod:`.transfer_shedder`), each reading a :class:`LoadData` snapshot plus the state its
previous call returned. Names are the snake_case of Pulsar's, and so are the defaults.

Version profiles: keyshared follows Pulsar 4.2 and master. Where the 4.0 LTS line
(as released, up to 4.0.7) behaves otherwise, the entry points concerned take
``pulsar_version``, one of :data:`PULSAR_VERSIONS`: ``"4.2"`` (the default) or ``"4.0"``;
any other value is a ``ValueError``. What ``"4.0"`` changes:

- topic names (:func:`topic_namespace`, :meth:`NamespaceBundles.find_bundle`): a v1 name
  ``domain://tenant/cluster/ns/topic`` is read, in the namespace ``tenant/cluster/ns``,
  where 4.2 refuses it;
- :class:`UniformLoadShedder`: a bundle is taken while its load is at most what is still
  wanted plus 1000 (msg/s or bytes/s; a 32-bit int sum, which wraps around past
  ``Integer.MAX_VALUE``), where 4.2 takes it only while it fits in what is still wanted;
- the SLA-monitor namespace is only ``sla-monitor/cluster/host:port`` (4.2:
  ``sla-monitor/host:port``), so ``sla-monitor/host:port`` bundles are reported by
  :func:`top_k_bundles` and may be shed by the four modular shedders (``pulsar_version``
  field) and listed by :meth:`LoadData.sheddable_bundles`.

:class:`AvgShedder` orders brokers by exact score for every profile: 4.0's comparator,
``(int) (score1 - score2)`` over hash-map order, is a defect 4.2 fixed, not reproduced.
:class:`TransferShedder` follows 4.2 only.
"""

from keyshared.loadbalance.bundles import (
    FULL_LOWER_BOUND,
    FULL_UPPER_BOUND,
    MAX_SPLIT_BUNDLES,
    SPLIT_ALGORITHMS,
    NamespaceBundle,
    can_split_bundle,
    flow_or_qps_equally_divide,
    range_equally_divide,
    specified_positions_divide,
    split_algorithm_of,
    split_bundles,
    topic_count_equally_divide,
    topic_hash,
    topic_namespace,
)
from keyshared.loadbalance.model import (
    DEFAULT_PULSAR_VERSION,
    MB,
    PULSAR_VERSIONS,
    BrokerLoad,
    LoadData,
    MessageRates,
    ResourceUsage,
    ResourceWeights,
    SheddingResult,
    Unload,
    bundle_namespace,
)
from keyshared.loadbalance.namespace_bundles import NamespaceBundles
from keyshared.loadbalance.shedders import (
    AvgShedder,
    AvgShedderState,
    OverloadShedder,
    ThresholdShedder,
    ThresholdShedderState,
    UniformLoadShedder,
)
from keyshared.loadbalance.transfer_shedder import (
    BrokerLoadEma,
    ShedderInputs,
    TransferShedder,
    TransferShedderState,
    TransferSheddingResult,
    is_system_service_namespace,
    top_k_bundles,
)

__all__ = [
    "DEFAULT_PULSAR_VERSION",
    "FULL_LOWER_BOUND",
    "FULL_UPPER_BOUND",
    "MAX_SPLIT_BUNDLES",
    "MB",
    "PULSAR_VERSIONS",
    "SPLIT_ALGORITHMS",
    "AvgShedder",
    "AvgShedderState",
    "BrokerLoad",
    "BrokerLoadEma",
    "LoadData",
    "MessageRates",
    "NamespaceBundle",
    "NamespaceBundles",
    "OverloadShedder",
    "ResourceUsage",
    "ResourceWeights",
    "ShedderInputs",
    "SheddingResult",
    "ThresholdShedder",
    "ThresholdShedderState",
    "TransferShedder",
    "TransferShedderState",
    "TransferSheddingResult",
    "UniformLoadShedder",
    "Unload",
    "bundle_namespace",
    "can_split_bundle",
    "flow_or_qps_equally_divide",
    "is_system_service_namespace",
    "range_equally_divide",
    "specified_positions_divide",
    "split_algorithm_of",
    "split_bundles",
    "top_k_bundles",
    "topic_count_equally_divide",
    "topic_hash",
    "topic_namespace",
]
