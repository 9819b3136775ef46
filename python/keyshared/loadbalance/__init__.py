"""Apache Pulsar's load-balancer policies as pure functions (SPEC section 9).

Bundle split algorithms over the 32-bit bundle ring (:mod:`.bundles`), a namespace's
bundles (:mod:`.namespace_bundles`), and the shedding
strategies of the modular load manager (:mod:`.shedders`) and of the extensible one
(:mod:`.transfer_shedder`), each reading a :class:`LoadData` snapshot plus the state its
previous call returned. Names are the snake_case of Pulsar's, and so are the defaults.
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
    MB,
    BrokerLoad,
    LoadData,
    MessageRates,
    ResourceUsage,
    ResourceWeights,
    SheddingResult,
    Unload,
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
    bundle_namespace,
    is_system_service_namespace,
    top_k_bundles,
)

__all__ = [
    "FULL_LOWER_BOUND",
    "FULL_UPPER_BOUND",
    "MAX_SPLIT_BUNDLES",
    "MB",
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
