"""Apache Pulsar's load-balancer policies as pure functions.

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

from keyshared.loadbalance import (
    bundles,
    model,
    namespace_bundles,
    shedders,
    transfer_shedder,
)
from keyshared.loadbalance.bundles import *
from keyshared.loadbalance.model import *
from keyshared.loadbalance.namespace_bundles import *
from keyshared.loadbalance.shedders import *
from keyshared.loadbalance.transfer_shedder import *

__all__: list[str] = []
__all__ += bundles.__all__
__all__ += model.__all__
__all__ += namespace_bundles.__all__
__all__ += shedders.__all__
__all__ += transfer_shedder.__all__
