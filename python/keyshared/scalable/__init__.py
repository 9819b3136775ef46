"""Scalable topics (PIP-468, PIP-483, PIP-486): the segment layout and topic names, the
subscription coordinator's segment assignment, the auto split / merge / rebucket policy and the
controller that applies it, the owning broker's load reports, traffic-balanced bucket
boundaries, PIP-486 bucket ownership and hand-off on the broker, entry-bucketed producer
batching, and migrating a partitioned topic (PIP-475) with its audit.
"""

from keyshared.scalable import (
    audit,
    balancing,
    batching,
    controller,
    coordinator,
    coordinator_events,
    layout,
    load_reporter,
    migration,
    ownership,
    policy,
    topic_name,
)
from keyshared.scalable.audit import *
from keyshared.scalable.balancing import *
from keyshared.scalable.batching import *
from keyshared.scalable.controller import *
from keyshared.scalable.coordinator import *
from keyshared.scalable.coordinator_events import *
from keyshared.scalable.layout import *
from keyshared.scalable.load_reporter import *
from keyshared.scalable.migration import *
from keyshared.scalable.ownership import *
from keyshared.scalable.policy import *
from keyshared.scalable.topic_name import *

__all__: list[str] = []
__all__ += audit.__all__
__all__ += balancing.__all__
__all__ += batching.__all__
__all__ += controller.__all__
__all__ += coordinator.__all__
__all__ += coordinator_events.__all__
__all__ += layout.__all__
__all__ += load_reporter.__all__
__all__ += migration.__all__
__all__ += ownership.__all__
__all__ += policy.__all__
__all__ += topic_name.__all__
