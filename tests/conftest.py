"""Shared test settings."""

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

from keyshared.scalable import layout as _layout

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from support.pulsar_broker import PulsarBroker, ScalableBroker, V5Client
    from support.pulsar_oracle import Oracle

# Two shared cores make wall-clock deadlines meaningless; correctness is what is tested here.
settings.register_profile("keyshared", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("keyshared")

# Every layout an operation makes in the tests is also checked whole (TopicLayout.validate),
# beside the operation's own check of what it changed.
_layout._FULL_CHECKS = True

# One small local session for every Spark test: starting a JVM costs seconds, so it is shared.
SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
}


@pytest.fixture(scope="session")
def spark() -> Iterator["SparkSession"]:
    from spark_udfs.session import get_session

    session = get_session("local[2]", "keyshared-tests", SPARK_TEST_CONF)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def oracle() -> Iterator["Oracle"]:
    """Pulsar's own classes, newest release (built by scripts/pulsar.sh)."""
    from support.pulsar_oracle import NEWEST, Oracle

    with Oracle(NEWEST) as running:
        yield running


@pytest.fixture(scope="session")
def oracle_lts() -> Iterator["Oracle"]:
    """Pulsar's own classes, the 4.0 LTS line."""
    from support.pulsar_oracle import LTS, Oracle

    with Oracle(LTS) as running:
        yield running


@pytest.fixture(scope="session")
def oracle_milestone() -> Iterator["Oracle"]:
    """Pulsar's own classes, the 5.0 milestone: the scalable-topic classes."""
    from support.pulsar_oracle import MILESTONE, Oracle

    with Oracle(MILESTONE) as running:
        yield running


@pytest.fixture(scope="session")
def pulsar_broker() -> Iterator["PulsarBroker"]:
    """A Pulsar standalone broker, newest release, on 127.0.0.1 (tests/support/pulsar_broker.py),
    with a 2 s keep-alive (``KEEP_ALIVE``), so that a consumer stopped past it is dropped
    within seconds."""
    from support.pulsar_broker import KEEP_ALIVE, PulsarBroker

    with PulsarBroker(settings=KEEP_ALIVE) as running:
        yield running


@pytest.fixture(scope="session")
def lts_broker() -> Iterator["PulsarBroker"]:
    """The same on Pulsar 4.0.7."""
    from support.pulsar_broker import KEEP_ALIVE, PulsarBroker
    from support.pulsar_oracle import LTS

    with PulsarBroker(LTS, settings=KEEP_ALIVE) as running:
        yield running


@pytest.fixture(scope="session")
def m1_broker() -> Iterator["ScalableBroker"]:
    """A Pulsar 5.0.0-M1 standalone broker with scalable topics, auto split/merge acting
    within seconds in public/default and never in public/manual (tests/support/pulsar_broker.py)."""
    from support.pulsar_broker import ScalableBroker

    with ScalableBroker() as running:
        yield running


@pytest.fixture(scope="session")
def v5_client(m1_broker: "ScalableBroker") -> Iterator["V5Client"]:
    """Pulsar 5.0.0-M1's V5 Java client on ``m1_broker`` (tests/support/pulsar_broker.py)."""
    from support.pulsar_broker import V5Client

    with V5Client(m1_broker) as running:
        yield running


@pytest.fixture(scope="session", params=["newest", "lts"])
def pulsar_release(request: pytest.FixtureRequest) -> "Oracle":
    """Each release a class is checked against in turn: 4.2.4, then 4.0.7."""
    running: Oracle = request.getfixturevalue(
        "oracle" if request.param == "newest" else "oracle_lts"
    )
    return running


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from support.faults import summary_lines
    from support.pulsar_oracle import COMPARISONS, KEPT

    write = terminalreporter.write_line
    if lines := summary_lines():
        terminalreporter.section("under faults")
        for line in lines:
            write(line)
    if not COMPARISONS:
        return
    terminalreporter.section("compared with the real implementations")
    kept = {area: counts for area, counts in COMPARISONS.items() if KEPT in area}
    for area, (cases, differences) in sorted(COMPARISONS.items()):
        if area not in kept:
            write(f"{area}: {cases} cases compared, {differences} differences")
    for area, (cases, _) in sorted(kept.items()):
        write(f"{area}: {cases} cases, each difference asserted")
    compared = [counts for area, counts in COMPARISONS.items() if area not in kept]
    write(
        f"total: {sum(c for c, _ in compared)} cases compared, "
        f"{sum(d for _, d in compared)} differences; "
        f"{sum(c for c, _ in kept.values())} differences kept on purpose"
    )


# Plain `pytest` runs the fast suite; scripts/test.sh passes `-m ""` to run everything. Each
# folder's conftest marks its kind; a test elsewhere that takes Pulsar's classes, a broker or
# Spark through a fixture is marked here as well.
PULSAR_FIXTURES = {
    "oracle",
    "oracle_lts",
    "oracle_milestone",
    "pulsar_release",
    "pulsar_broker",
    "lts_broker",
    "m1_broker",
    "v5_client",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
        if PULSAR_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.pulsar)


def worker_group(nodeid: str) -> str:
    """The tests one pytest-xdist worker runs together (scripts/test.sh runs two): every test
    that starts a broker (tests/broker, and test_docs, which asks for one by name), so that
    each broker starts once; every Spark test, for one Spark session; else a file's tests, so
    that its module fixtures are made once."""
    path = nodeid.split("::")[0]
    if path.startswith("tests/broker/") or path == "tests/package/test_docs.py":
        return "brokers"
    if path.startswith("tests/spark/"):
        return "spark"
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scope scheduling, each scope a :func:`worker_group`."""
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkerGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return ByWorkerGroup(config, log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker hands its comparison and fault counts to the controller, which
    prints the summary."""
    from support.faults import FAULTS
    from support.pulsar_oracle import COMPARISONS

    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["comparisons"] = dict(COMPARISONS)
        output["faults"] = {kind: vars(tally) for kind, tally in FAULTS.items()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    from support.faults import merge_faults
    from support.pulsar_oracle import record

    output = getattr(node, "workeroutput", {})
    for area, (cases, differences) in output.get("comparisons", {}).items():
        record(area, cases, differences)
    for kind, tally in output.get("faults", {}).items():
        merge_faults(kind, tally)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[None]:
    """A test against Pulsar that skips fails instead: a comparison not made must not pass
    as one made."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and item.get_closest_marker("pulsar") is not None:
        report.outcome = "failed"
        report.longrepr = f"a test against Pulsar was skipped: {report.longrepr}"
