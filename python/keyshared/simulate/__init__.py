"""A deterministic discrete-event simulator of Key_Shared consumption on scalable topics,
built only on keyshared's own kernels: producers batch through the bucketed batcher, the
controller splits, merges and rebuckets by :func:`keyshared.decide` and assigns buckets to
consumers, each segment's dispatcher hands buckets over with draining hashes and pending
acks, keeps a safe cursor and per-bucket checkpoints, and retries through the in-flight
window. Every step is checked against the ordering and delivery invariants.

::

    from keyshared.simulate import builtin_scenario, simulate, summarize

    result = simulate(builtin_scenario("drain-backlog", scale=0.1), seed=1)
    summary = summarize(result)
"""

from keyshared.simulate.builtin import BUILTIN, builtin_scenario
from keyshared.simulate.dispatch import HandOff
from keyshared.simulate.engine import Simulation, SimulationResult, simulate
from keyshared.simulate.invariants import InvariantViolation
from keyshared.simulate.report import render_text, summarize, to_json, write_outputs
from keyshared.simulate.scenario import (
    BatchingSpec,
    ConsumerSpec,
    KeySpec,
    PayloadSpec,
    ProducerSpec,
    RateChange,
    Scenario,
    ScenarioError,
    Stall,
    TopicSpec,
    WindowSpec,
)

__all__ = [
    "BUILTIN",
    "BatchingSpec",
    "ConsumerSpec",
    "HandOff",
    "InvariantViolation",
    "KeySpec",
    "PayloadSpec",
    "ProducerSpec",
    "RateChange",
    "Scenario",
    "ScenarioError",
    "Simulation",
    "SimulationResult",
    "Stall",
    "TopicSpec",
    "WindowSpec",
    "builtin_scenario",
    "render_text",
    "simulate",
    "summarize",
    "to_json",
    "write_outputs",
]
