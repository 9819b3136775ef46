"""A Pulsar standalone broker in a child JVM, for end-to-end tests against the real thing.

It runs ``PulsarStandaloneStarter`` from Pulsar's released jars (Maven Central, through
Maven): RocksDB (or ZooKeeper) metadata and one bookie in the same process, no functions
worker, no stream storage, everything on 127.0.0.1 with free ports and its data in a
temporary folder. Every wait has a timeout: a broker that does not come up raises
:class:`BrokerUnavailable` with the tail of its log, and closing it kills its whole process
group, so no JVM outlives the tests.

The session fixtures of tests/conftest.py:

- ``pulsar_broker`` and ``lts_broker``: :class:`PulsarBroker` on 4.2.4 and 4.0.7 (Key_Shared,
  partitioned topics), with a 2 s keep-alive (:data:`KEEP_ALIVE`).
- ``m1_broker``: :class:`ScalableBroker` on 5.0.0-M1 with scalable topics (PIP-483) and
  auto split/merge acting within seconds (:data:`SCALABLE_CONF`). Topics in
  :data:`AUTO_NAMESPACE` (``public/default``) scale by themselves; topics in
  :data:`MANUAL_NAMESPACE` (``public/manual``) never do, for tests that split and merge by
  hand. Usage::

      def test_x(m1_broker: ScalableBroker) -> None:
          name = m1_broker.create("topic://public/manual/t1", segments=2)
          m1_broker.split(name, 0)                    # POST .../split/0
          layout = m1_broker.layout(name)             # GET, the broker's JSON
          m1_broker.merge(name, 1, 3)                 # POST .../merge/1/3
          m1_broker.scalable(name, "stats")           # any GET under the topic
          m1_broker.drained_segments(name, "sub")     # drains its coordinator logged
          m1_broker.web_url, m1_broker.service_url    # for clients
          m1_broker.metadata_connect                  # its ZooKeeper, host:port
          m1_broker.log_lines()                       # its log so far

  An HTTP error answer raises :class:`AdminError` carrying its status and message.
- ``v5_client``: :class:`V5Client`, M1's V5 Java client on ``m1_broker`` (the oracle's
  ``v5.*`` ops in a JVM of their own)::

      segments = v5_client.produce(name, ["k1", "k2"])      # the segment of each message
      c = v5_client.stream_consumer(name, "sub", "c0")       # a handle
      v5_client.receive(c, quiet_ms=1000)   # [{key, value, topic, segment_id}], acked
      v5_client.assignment(c)               # (layout epoch, [(id, start, end)])
      v5_client.close(c)
      v5_client.pause(); v5_client.resume()   # SIGSTOP / SIGCONT of its JVM
      v5_client.log_lines()                  # the V5 client's log (assignments applied)
      # own_client=True: a connection of its own, whose closing makes it leave the
      # subscription; resubscribe(c) retries segments M1's consumer failed to attach.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from keyshared.routing import sticky_key_hash
from support.pulsar_oracle import MILESTONE, NEWEST, ROOT, Oracle, OracleError, OracleUnavailable

START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 10.0

# The settings in which Pulsar's conf/standalone.conf differs from ServiceConfiguration's
# defaults and that matter to one broker with one bookie; everything else keeps Pulsar's
# defaults. The Key_Shared settings are the defaults, written out because the tests rely on
# them.
STANDALONE_CONF = {
    "clusterName": "standalone",
    "bindAddress": "127.0.0.1",
    "advertisedAddress": "127.0.0.1",
    "managedLedgerDefaultEnsembleSize": "1",
    "managedLedgerDefaultWriteQuorum": "1",
    "managedLedgerDefaultAckQuorum": "1",
    "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.NoopLoadManager",
    "loadBalancerEnabled": "false",
    "transactionCoordinatorEnabled": "false",
    "allowAutoTopicCreationType": "non-partitioned",
    "subscriptionKeySharedUseConsistentHashing": "true",
    "subscriptionKeySharedConsistentHashingReplicaPoints": "100",
    # The WebSocket API runs Pulsar's Java client inside the broker: the tests reach the Java
    # client's key routing through it.
    "webSocketServiceEnabled": "true",
    # A topic left without clients between two steps of a test must keep its state.
    "brokerDeleteInactiveTopicsEnabled": "false",
    "brokerShutdownTimeoutMs": "10000",
    "managedLedgerCacheSizeMB": "64",
    # The bookie reads the same file.
    "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
    "journalSyncData": "false",
    "journalMaxGroupWaitMSec": "1",
    "allowLoopback": "true",
    "listeningInterface": "lo",
    "diskUsageThreshold": "0.99",
    "diskUsageWarnThreshold": "0.99",
    "dbStorage_writeCacheMaxSizeMb": "16",
    "dbStorage_readAheadCacheMaxSizeMb": "16",
    "dbStorage_rocksDB_blockCacheSize": str(16 * 1024 * 1024),
}

#: The keep-alive of the suite's shared brokers and of the fault and verify tests' (in s, as
#: the broker setting): a consumer stopped past it is dropped within seconds.
KEEP_ALIVE_S = 2
KEEP_ALIVE = {"keepAliveIntervalSeconds": str(KEEP_ALIVE_S)}

# Pulsar 5's scalable topics (PIP-483), with auto split/merge deciding every second on load
# figures refreshed every second, so that a test sees it act within seconds; the split and
# merge thresholds stay Pulsar's defaults (a test sets its own per topic or namespace through
# the autoScalePolicy endpoints). Cooldowns and the merge window are seconds, not minutes.
SCALABLE_CONF = {
    "scalableTopicsEnabled": "true",
    "scalableTopicAutoScaleEnabled": "true",
    "scalableTopicAutoScaleIntervalSeconds": "1",
    "scalableTopicLoadReportIntervalSeconds": "1",
    "scalableTopicSplitCooldownSeconds": "2",
    "scalableTopicMergeCooldownSeconds": "2",
    "scalableTopicMergeWindowSeconds": "3",
    "scalableTopicConsumerSessionGracePeriodSeconds": "5",
    "statsUpdateInitialDelayInSecs": "1",
    "statsUpdateFrequencyInSecs": "1",
}
# Topics here scale by themselves (SCALABLE_CONF); topics in the manual one never do.
AUTO_NAMESPACE = "public/default"
MANUAL_NAMESPACE = "public/manual"

# As Pulsar's bin/pulsar runs the broker on Java 17, with a modest heap.
JVM_OPTIONS = [
    "-Xms256m",
    "-Xmx1g",
    "-XX:MaxDirectMemorySize=512m",
    "-Dio.netty.leakDetectionLevel=disabled",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens=java.base/sun.net=ALL-UNNAMED",
    "--add-opens=java.management/sun.management=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.platform=ALL-UNNAMED",
]

# Pulsar 5 logs a message's fields apart from its text (``Auto split {reason=msgRateIn,
# segmentId=0, ...}``): the pattern prints them after it.
LOG4J2_CONF = """\
status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{HH:mm:ss.SSS} %-5level [%t] %c{1} - %msg %X%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
"""


def owner_by_ranges(stats: Any, key: str, subscription: str = "sub") -> str | None:
    """The consumer whose ``keyHashRangeArrays`` in a topic's stats contain the key's sticky
    hash, read straight from the broker's stats."""
    h = sticky_key_hash(key)
    for c in stats["subscriptions"][subscription]["consumers"]:
        if any(s <= h <= e for s, e in c["keyHashRangeArrays"]):
            name: str = c["consumerName"]
            return name
    return None


class BrokerUnavailable(RuntimeError):
    """The broker did not start, died, or did not answer in time."""


class AdminError(RuntimeError):
    """The broker answered an admin request with an HTTP error: ``status`` and the
    ``reason`` Pulsar gave."""

    def __init__(self, method: str, path: str, status: int, reason: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {reason}")
        self.status = status
        self.reason = reason


def broker_classpath(version: str) -> str:
    """The broker's runtime classpath: the oracle's build of ``version`` (scripts/pulsar.sh),
    pulsar-broker with the dependency versions Pulsar's own build pins."""
    cp_file = ROOT / "oracle" / "target" / version / "classpath.txt"
    if not cp_file.is_file():
        raise BrokerUnavailable(f"{cp_file} is missing: run scripts/pulsar.sh")
    return cp_file.read_text().strip()


def free_port() -> int:
    """A port free on 127.0.0.1 now (the JVM binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_get(
    url: str, timeout_s: float = HTTP_TIMEOUT_S, headers: Mapping[str, str] | None = None
) -> Any:
    """The JSON (or text) answer of a GET; urllib's errors pass through."""
    return http_request("GET", url, timeout_s=timeout_s, headers=headers)


def http_request(
    method: str,
    url: str,
    body: Any = None,
    timeout_s: float = HTTP_TIMEOUT_S,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """The JSON (or text) answer of a request with an optional JSON ``body`` and extra
    ``headers`` (a secured broker's ``Authorization``)."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    sent = {"Content-Type": "application/json"} if data is not None else {}
    sent.update(headers or {})
    request = urllib.request.Request(url, data=data, method=method, headers=sent)
    with urllib.request.urlopen(request, timeout=timeout_s) as answer:
        text = answer.read().decode("utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _is_ready(web_url: str, headers: Mapping[str, str] | None = None) -> bool:
    try:
        health = http_get(f"{web_url}/admin/v2/brokers/health", 5.0, headers)
        # The standalone starter creates public/default only after the broker is up.
        namespaces = http_get(f"{web_url}/admin/v2/namespaces/public", headers=headers)
        return health == "ok" and "public/default" in namespaces
    except (OSError, urllib.error.URLError):
        return False


def wait_until_ready(
    web_url: str,
    timeout_s: float,
    alive: Callable[[], bool] = lambda: True,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Polls the broker's health check (with ``headers``: a secured broker's credentials)
    until it passes; BrokerUnavailable when ``alive()`` turns false or ``timeout_s`` passes
    first."""
    deadline = time.monotonic() + timeout_s
    while not _is_ready(web_url, headers):
        if not alive():
            raise BrokerUnavailable(f"the broker at {web_url} exited while starting")
        if time.monotonic() >= deadline:
            raise BrokerUnavailable(f"the broker at {web_url} was not ready within {timeout_s} s")
        time.sleep(0.5)


class PulsarBroker:
    """One standalone broker on Pulsar ``version``. Use as a context manager or call
    :meth:`close`."""

    def __init__(
        self,
        version: str = NEWEST,
        start_timeout_s: float = START_TIMEOUT_S,
        settings: Mapping[str, str] | None = None,
        zookeeper: bool = False,
        advertised_address: str = "127.0.0.1",
        admin_headers: Mapping[str, str] | None = None,
    ) -> None:
        """Starts the broker of ``version`` with ``settings`` over :data:`STANDALONE_CONF`
        and waits until it serves; BrokerUnavailable (with its log's tail) otherwise. Its
        metadata store is RocksDB inside the broker, or with ``zookeeper`` a ZooKeeper
        server in the same process that tests can read while the broker runs, at
        :attr:`metadata_connect`. It tells clients to connect to ``advertised_address``
        (it listens on 127.0.0.1 whatever it is), and its readiness check and
        :meth:`admin` send ``admin_headers`` (a secured broker's credentials)."""
        self.version = version
        self.settings = {**STANDALONE_CONF, **(settings or {})}
        self.zookeeper = zookeeper
        self.advertised_address = advertised_address
        self.admin_headers = dict(admin_headers or {})
        self._dir = Path(tempfile.mkdtemp(prefix="keyshared-pulsar-"))
        self._ports = (free_port(), free_port(), free_port())
        broker_port, web_port, _ = self._ports
        self.service_url = f"pulsar://127.0.0.1:{broker_port}"
        self.web_url = f"http://127.0.0.1:{web_port}"
        self.websocket_url = f"ws://127.0.0.1:{web_port}/ws/v2"
        self._log_path = self._dir / "broker.log"
        #: ``host:port`` of the ZooKeeper holding the broker's metadata (``zookeeper`` only).
        self._zookeeper_port = free_port() if zookeeper else None
        self.metadata_connect = f"127.0.0.1:{self._zookeeper_port}" if zookeeper else None
        try:
            self._start(start_timeout_s)
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise

    def _start(self, timeout_s: float) -> None:
        """Starts the JVM on the broker's ports and data and waits until it serves; on
        failure stops it and raises BrokerUnavailable with its log's tail."""
        self._proc = self._spawn(*self._ports)
        try:
            wait_until_ready(
                self.web_url, timeout_s, lambda: self._proc.poll() is None, self.admin_headers
            )
        except BaseException as e:
            tail = self.log_tail()
            self._stop()
            raise BrokerUnavailable(f"{e}; the end of its log:\n{tail}") from None

    def restart(self, hard: bool = True, timeout_s: float = START_TIMEOUT_S) -> float:
        """Stops the broker (``kill -9`` with ``hard``, else SIGTERM as an operator's stop)
        and starts it again on its own ports and data; the seconds until it served again.
        Clients connected to it see their connections drop and reconnect."""
        if self._proc.poll() is not None:
            raise BrokerUnavailable(
                f"cannot restart: the broker already exited:\n{self.log_tail()}"
            )
        began = time.monotonic()
        if hard:
            self._signal_group(signal.SIGKILL)
            self._proc.wait(timeout=STOP_TIMEOUT_S)
        else:
            self._stop()
        self._start(timeout_s)
        return time.monotonic() - began

    def _spawn(self, broker_port: int, web_port: int, bookie_port: int) -> subprocess.Popen[bytes]:
        settings = {**self.settings, "brokerServicePort": broker_port, "webServicePort": web_port}
        conf = self._dir / "standalone.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        log4j = self._dir / "log4j2.properties"
        log4j.write_text(LOG4J2_CONF)
        data = self._dir / "data"
        command = [
            "java",
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            broker_classpath(self.version),
            "org.apache.pulsar.PulsarStandaloneStarter",
            "--config", str(conf),
            "--advertised-address", self.advertised_address,
            "--metadata-dir", str(data / "metadata"),
            "--bookkeeper-dir", str(data / "bookkeeper"),
            "--no-functions-worker",
            "--no-stream-storage",
        ]  # fmt: skip
        if not self.version.startswith("5."):
            # Pulsar 5's starter refuses it (its bookie takes a port of the kernel's choice).
            command += ["--bookkeeper-port", str(bookie_port)]
        env = None
        if self.zookeeper:
            # The starter's ZooKeeper mode (a hidden option and a switch of its environment).
            command += ["--zookeeper-port", str(self._zookeeper_port)]
            env = {**os.environ, "PULSAR_STANDALONE_USE_ZOOKEEPER": "1"}
        if self.zookeeper or not self.version.startswith("5."):
            command += ["--zookeeper-dir", str(data / "zookeeper")]
        with open(self._log_path, "ab") as log:
            # A session of its own, so that closing can signal every process the JVM starts.
            return subprocess.Popen(
                command,
                cwd=self._dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )

    def log_lines(self) -> list[str]:
        """The broker's log so far, line by line."""
        return self._log_path.read_text(errors="replace").splitlines()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "".join(self._log_path.read_text(errors="replace").splitlines(True)[-lines:])
        except OSError:
            return "(no log)"

    def admin(self, path: str, method: str = "GET", body: Any = None) -> Any:
        """``/admin/v2/<path>`` as JSON; BrokerUnavailable when the broker has exited."""
        if self._proc.poll() is not None:
            raise BrokerUnavailable(f"the broker has exited:\n{self.log_tail()}")
        return http_request(
            method, f"{self.web_url}/admin/v2/{path}", body, headers=self.admin_headers
        )

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Creates ``persistent://public/default/<topic>`` with ``partitions`` partitions."""
        self.admin(f"persistent/public/default/{topic}/partitions", "PUT", partitions)

    def topic_stats(self, topic: str) -> Any:
        """The stats of ``persistent://public/default/<topic>``."""
        return self.admin(f"persistent/public/default/{topic}/stats")

    def close(self) -> None:
        """Stops the broker and removes its folder."""
        try:
            self._stop()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT_S."""
        self._signal_group(signal.SIGTERM)
        try:
            self._proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            self._proc.wait(timeout=STOP_TIMEOUT_S)
        # Whatever the JVM started in its group goes with it.
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def __enter__(self) -> PulsarBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The coordinator's report of newly drained segments, with its context (LOG4J2_CONF's %X).
DRAINED_LOG = re.compile(
    r"Sealed segments drained, rebalancing \{(?=.*\bdrained=\[(?P<ids>[0-9, ]*)\])"
    r"(?=.*\bsubscription=(?P<subscription>[^,}]*))(?=.*\btopic=(?P<topic>[^,}]*))"
)


def error_reason(body: bytes) -> str:
    """What an admin error answer says: the ``reason`` of Pulsar's JSON answer, or the
    ``Message:`` line of the page an unexpected exception gives (HTTP 500)."""
    text = body.decode("utf-8", errors="replace")
    with contextlib.suppress(json.JSONDecodeError, AttributeError):
        text = str(json.loads(text).get("reason", text))
    for line in text.splitlines():
        if line.startswith("Message: "):
            return line.removeprefix("Message: ")
    return text.strip()


def scalable_path(topic: str) -> str:
    """``tenant/ns/local`` of a scalable topic given as ``topic://tenant/ns/local`` or as
    ``tenant/ns/local``."""
    name = topic.removeprefix("topic://")
    if name.count("/") != 2 or "" in name.split("/"):
        raise ValueError(f"topic must be topic://tenant/namespace/name, got {topic!r}")
    return name


class ScalableBroker(PulsarBroker):
    """A 5.0.0-M1 standalone broker with scalable topics (:data:`SCALABLE_CONF`), its
    namespaces ready: :data:`AUTO_NAMESPACE` scales by itself, :data:`MANUAL_NAMESPACE`
    never does. The methods wrap ``/admin/v2/scalable/{tenant}/{ns}/{topic}``; each answers
    the broker's JSON and raises :class:`AdminError` on an HTTP error. Its metadata is in
    ZooKeeper (``zookeeper=True``), so that a test can watch the records the controller
    acts on (layouts, load records, consumer registrations) at :attr:`metadata_connect`."""

    def __init__(
        self,
        version: str = MILESTONE,
        start_timeout_s: float = START_TIMEOUT_S,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            version, start_timeout_s, {**SCALABLE_CONF, **(settings or {})}, zookeeper=True
        )
        try:
            self.admin(f"namespaces/{MANUAL_NAMESPACE}", "PUT", {})
            self.admin(
                f"namespaces/{MANUAL_NAMESPACE}/scalableTopicAutoScalePolicy",
                "POST",
                {"enabled": False},
            )
        except BaseException:
            self.close()
            raise

    def admin(self, path: str, method: str = "GET", body: Any = None) -> Any:
        """``/admin/v2/<path>`` as JSON; AdminError on an HTTP error, BrokerUnavailable when
        the broker has exited."""
        try:
            return super().admin(path, method, body)
        except urllib.error.HTTPError as e:
            raise AdminError(method, path, e.code, error_reason(e.read())) from None

    def scalable(self, topic: str, path: str = "", method: str = "GET", body: Any = None) -> Any:
        """``/admin/v2/scalable/<tenant/ns/local>[/<path>]`` of ``topic`` (a ``path`` that
        starts with ``?`` is a query)."""
        suffix = path if not path or path.startswith("?") else f"/{path}"
        return self.admin(f"scalable/{scalable_path(topic)}{suffix}", method, body)

    def create(self, topic: str, segments: int = 1) -> str:
        """Creates the scalable topic with ``segments`` initial segments; its full name."""
        self.scalable(topic, f"?numInitialSegments={segments}", "PUT")
        return f"topic://{scalable_path(topic)}"

    def layout(self, topic: str) -> Any:
        """The topic's layout (epoch, nextSegmentId, segments by id) as the broker has it."""
        return self.scalable(topic)

    def split(self, topic: str, segment_id: int) -> Any:
        return self.scalable(topic, f"split/{segment_id}", "POST")

    def merge(self, topic: str, segment_a: int, segment_b: int) -> Any:
        return self.scalable(topic, f"merge/{segment_a}/{segment_b}", "POST")

    def stats(self, topic: str) -> Any:
        return self.scalable(topic, "stats")

    def delete(self, topic: str) -> None:
        self.scalable(topic, "?force=true", "DELETE")

    def drained_segments(self, topic: str, subscription: str) -> set[int]:
        """The sealed segments the subscription coordinator of ``topic`` has found drained
        for ``subscription`` so far, as its log reports them ("Sealed segments drained,
        rebalancing", each report naming the newly drained ones)."""
        name = f"topic://{scalable_path(topic)}"
        drained: set[int] = set()
        for line in self._log_path.read_text(errors="replace").splitlines():
            found = DRAINED_LOG.search(line)
            if found and found["topic"] == name and found["subscription"] == subscription:
                drained |= {int(i) for i in found["ids"].split(",") if i.strip()}
        return drained


class V5Client:
    """Pulsar 5.0.0-M1's V5 Java client on a broker, through the oracle's ``v5.*`` ops (its
    own JVM): producers and stream consumers of ``topic://`` names. Every call is bounded
    by ``timeout_ms``; a JVM that dies or hangs raises OracleUnavailable."""

    def __init__(self, broker: PulsarBroker, timeout_ms: int = 30_000) -> None:
        self.timeout_ms = timeout_ms
        self.service_url = broker.service_url
        # The client of each consumer that has one of its own.
        self._own_clients: dict[int, int] = {}
        self.oracle = Oracle(MILESTONE, timeout_s=timeout_ms / 1000 + 30)
        try:
            self.client = self._new_client()
        except BaseException:
            self.oracle.close()
            raise

    def _new_client(self) -> int:
        handle: int = self.oracle.call(
            "v5.client", service_url=self.service_url, timeout_ms=self.timeout_ms
        )
        return handle

    def produce(
        self, topic: str, keys: Sequence[str], values: Sequence[str] | None = None
    ) -> list[int]:
        """Sends one message per key, in order; the segment id each was stored in."""
        segments: list[int] = self.oracle.call(
            "v5.produce",
            client=self.client,
            topic=topic,
            keys=list(keys),
            values=None if values is None else list(values),
            timeout_ms=self.timeout_ms,
        )
        return segments

    def stream_consumer(
        self, topic: str, subscription: str, name: str, own_client: bool = False
    ) -> int:
        """A stream consumer from the earliest message; its handle. With ``own_client``
        it has a client (a connection) of its own, which :meth:`close` closes: that is how
        it leaves the subscription, since M1's consumer sends no unsubscribe and the broker
        drops its session only once the connection closed and the grace period passed."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            try:
                return self._subscribe(topic, subscription, name, own_client)
            except OracleError as e:
                # M1's consumer that is handed a segment may subscribe before the consumer
                # losing it has let go; that subscribe fails "Exclusive consumer is already
                # connected", and the join with it. The session stays registered, so
                # joining again under the same name resumes it.
                if "ConsumerBusyException" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _subscribe(self, topic: str, subscription: str, name: str, own_client: bool) -> int:
        client = self._new_client() if own_client else self.client
        try:
            handle: int = self.oracle.call(
                "v5.stream_consumer",
                client=client,
                topic=topic,
                subscription=subscription,
                consumer_name=name,
                timeout_ms=self.timeout_ms,
            )
        except BaseException:
            if own_client:
                self.oracle.call("v5.close", handle=client)
            raise
        if own_client:
            self._own_clients[handle] = client
        return handle

    def receive(self, consumer: int, quiet_ms: int = 1000) -> list[dict[str, Any]]:
        """What the consumer receives until it has been quiet for ``quiet_ms``, each
        acknowledged: ``{key, value, topic, segment_id}``."""
        received: list[dict[str, Any]] = self.oracle.call(
            "v5.receive", handle=consumer, quiet_ms=quiet_ms, timeout_ms=self.timeout_ms
        )
        return received

    def resubscribe(self, consumer: int) -> list[int]:
        """Subscribes the consumer again to the assigned segments whose subscription failed
        (M1's consumer that is handed a segment before its previous owner let go gets
        ConsumerBusy, and then leaves that segment unread); their ids."""
        failed: list[int] = self.oracle.call("v5.resubscribe", handle=consumer)
        return failed

    def segments(self, consumer: int) -> dict[int, str]:
        """The consumer's per-segment subscriptions by segment id: ``pending``, ``failed:
        <cause>`` (M1 keeps it and never retries), ``connected`` or ``disconnected``."""
        return {int(i): state for i, state in self.oracle.call("v5.segments", handle=consumer)}

    def assignment(self, consumer: int) -> tuple[int, list[tuple[int, int, int]]]:
        """The layout epoch and the segments ``(id, start, end)`` the controller last
        assigned the consumer, in its order."""
        answer = self.oracle.call("v5.assignment", handle=consumer)
        return answer["epoch"], [tuple(s) for s in answer["segments"]]

    def close(self, handle: int) -> None:
        """Closes a consumer, and its own client if it has one."""
        self.oracle.call("v5.close", handle=handle)
        if handle in self._own_clients:
            self.oracle.call("v5.close", handle=self._own_clients.pop(handle))

    def pause(self) -> None:
        """Stops its JVM (SIGSTOP): every client and consumer in it keeps its connections
        but handles nothing, assignment updates included, until :meth:`resume`."""
        self.oracle.pause()

    def resume(self) -> None:
        self.oracle.resume()

    def log_lines(self) -> list[str]:
        """Its JVM's log so far: the V5 client's own lines (assignments applied, segment
        subscriptions and their failures)."""
        return self.oracle.log_lines()

    def kill(self) -> None:
        """``kill -9`` of its JVM: every client, producer and consumer it holds dies with
        it, so the broker sees their connections drop, not close. :meth:`shutdown` still
        tidies up after it."""
        self.oracle.kill()

    def shutdown(self) -> None:
        """Closes the client and its JVM."""
        try:
            with contextlib.suppress(OracleError, OracleUnavailable):
                self.oracle.call("v5.close", handle=self.client)
        finally:
            self.oracle.close()

    def __enter__(self) -> V5Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
