"""``keyshared explain --url`` and the Pulsar client of
:class:`keyshared.connection.ClusterConnection` on a secured Pulsar 4.2.4 broker (token and TLS
authentication, authorization, TLS on both ports: tests/support/secure_broker.py).

With the right settings (a token and the CA; pulsar-admin's client.conf alone; a client
certificate) explain answers, and a Pulsar client produces and consumes over
``pulsar+ssl://`` with the token. Each wrong setting (no token, a role without permission, no
CA, the wrong host name) is one line on stderr and exit 2, without a traceback, naming what
to change; the Pulsar client's failures read the same through ``failure()``. Last, no secret
(a token, the token key, a private key) shows in any output of the file's tests.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import pulsar
import pytest
from support.secure_broker import NOBODY, VERIFIER, SecuredBroker

from keyshared.cli import main
from keyshared.connection import ClusterConnection, Secret
from keyshared.errors import ClusterAccessError

SUB = "sub"
KEYS = [f"key-{i}" for i in range(20)]
CONSUMERS = ("c0", "c1")
RECEIVE_TIMEOUT_S = 30.0
# A child process explaining: its start and the request, on two busy cores.
CHILD_TIMEOUT_S = 60.0
#: Every output of this file's commands and clients, checked for secrets at the end.
OUTPUTS: list[str] = []


def _quiet() -> logging.Logger:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger


def _verifier(broker: SecuredBroker, **settings: Any) -> ClusterConnection:
    values: dict[str, Any] = {
        "admin_url": broker.https_url,
        "service_url": broker.ssl_url,
        "token": Secret(broker.tokens[VERIFIER]),
        "tls_trust_certs": broker.ca,
        "timeout_s": 15,
    }
    return ClusterConnection(**{**values, **settings})


@pytest.fixture(scope="module")
def topic(secured_broker: SecuredBroker) -> Iterator[str]:
    """A topic with a Key_Shared subscription of two consumers that hold what they
    received, made by a Pulsar client over pulsar+ssl:// with the verifier's token."""
    name = f"persistent://public/default/secured-{uuid.uuid4().hex[:8]}"
    client = _verifier(secured_broker).pulsar_client(logger=_quiet())
    try:
        consumers = [
            client.subscribe(
                name, SUB, consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=c
            )
            for c in CONSUMERS
        ]
        producer = client.create_producer(name)
        for key in KEYS:
            producer.send(key.encode(), partition_key=key)
        received: list[str] = []
        deadline = time.monotonic() + RECEIVE_TIMEOUT_S
        while len(received) < len(KEYS) and time.monotonic() < deadline:
            for consumer in consumers:
                try:
                    received.append(consumer.receive(timeout_millis=200).partition_key())
                except pulsar.Timeout:
                    continue
        assert sorted(received) == sorted(KEYS), "the consumers received every message"
        yield name
    finally:
        client.close()


def explain(*argv: str) -> tuple[int, str, str]:
    """``keyshared explain ARGV`` in this process: its status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stderr(err):
        status = main(["explain", *argv], out=out)
    OUTPUTS.extend([out.getvalue(), err.getvalue()])
    return status, out.getvalue(), err.getvalue()


def test_a_pulsar_client_produces_and_consumes_over_tls_with_the_token(topic: str) -> None:
    assert topic.startswith("persistent://public/default/secured-")


def test_explain_answers_with_the_token_and_the_ca(
    secured_broker: SecuredBroker, topic: str
) -> None:
    where = ["--url", secured_broker.https_url, "--topic", topic, "--subscription", SUB]
    trust = ["--tls-trust-certs", str(secured_broker.ca)]
    token_file = str(secured_broker.token_file(VERIFIER))
    status, out, err = explain(*where, *trust, "--token-file", token_file, "--json")
    assert (status, err) == (0, "")
    answer = json.loads(out)
    assert {s["consumer"] for s in answer["shares"]} == set(CONSUMERS)
    os.environ["KEYSHARED_TEST_TOKEN"] = secured_broker.tokens[VERIFIER]
    try:
        status, out, err = explain(*where, *trust, "--token-env", "KEYSHARED_TEST_TOKEN")
    finally:
        del os.environ["KEYSHARED_TEST_TOKEN"]
    assert (status, err) == (0, "") and "c0" in out


def test_explain_answers_with_client_conf_alone(
    secured_broker: SecuredBroker, topic: str, tmp_path: Path
) -> None:
    conf = tmp_path / "client.conf"
    token = secured_broker.token_file(VERIFIER)
    conf.write_text(
        "# as pulsar-admin reads it\n"
        f"webServiceUrl={secured_broker.https_url}/\n"
        f"brokerServiceUrl={secured_broker.ssl_url}/\n"
        "authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n"
        f"authParams=file://{token}\n"
        f"tlsTrustCertsFilePath={secured_broker.ca}\n"
        "tlsAllowInsecureConnection=false\n"
        "tlsEnableHostnameVerification=true\n"
    )
    status, out, err = explain("--client-conf", str(conf), "--topic", topic, "--subscription", SUB)
    assert (status, err) == (0, "") and "c1" in out
    # The same file makes the Pulsar client: it reads the subscription's backlog.
    connection = ClusterConnection.from_client_conf(conf)
    stats = connection.admin_json("GET", f"/admin/v2/{topic.replace('://', '/')}/stats")
    assert set(stats["subscriptions"]) == {SUB}
    OUTPUTS.append(json.dumps(connection.describe()))


def test_explain_answers_with_mutual_tls(secured_broker: SecuredBroker, topic: str) -> None:
    cert, key = secured_broker.client_cert
    status, out, err = explain(
        "--url",
        secured_broker.https_url,
        "--topic",
        topic,
        "--subscription",
        SUB,
        "--tls-trust-certs",
        str(secured_broker.ca),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
    )
    assert (status, err) == (0, "") and "c0" in out


WRONG = {
    "no token": (
        lambda b: ["--tls-trust-certs", str(b.ca)],
        "HTTP 401: the cluster refused the credentials: none were given; give a token with"
        " --token/--token-file/--token-env or --client-conf",
    ),
    "a role without permission": (
        lambda b: ["--tls-trust-certs", str(b.ca), "--token-file", str(b.token_file(NOBODY))],
        "the role 'nobody' has no permission for persistent://public/default/secured-",
    ),
    "an unknown CA": (
        lambda b: ["--token-file", str(b.token_file(VERIFIER))],
        "the broker's certificate is not signed by a trusted CA",
    ),
    "the wrong host name": (
        lambda b: [
            "--url",
            b.https_url.replace("localhost", "127.0.0.1"),
            "--tls-trust-certs",
            str(b.ca),
            "--token-file",
            str(b.token_file(VERIFIER)),
        ],
        "the certificate is for localhost, not 127.0.0.1: connect by that name, or give"
        " --tls-no-hostname-verification",
    ),
}


@pytest.mark.parametrize("case", WRONG)
def test_each_wrong_setting_is_one_line_and_exit_2(
    secured_broker: SecuredBroker, topic: str, case: str
) -> None:
    """In a child process, as an operator runs it: status 2, nothing on stdout, one line on
    stderr saying what to change, no traceback."""
    settings, said = WRONG[case]
    argv = ["--url", secured_broker.https_url, "--topic", topic, "--subscription", SUB]
    done = subprocess.run(
        [sys.executable, "-m", "keyshared", "explain", *argv, *settings(secured_broker)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    OUTPUTS.extend([done.stdout, done.stderr])
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("keyshared explain: error: https://")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert said in done.stderr


def test_the_pulsar_clients_failures_read_as_one_line(
    secured_broker: SecuredBroker, topic: str
) -> None:
    untrusted = ClusterConnection(
        service_url=secured_broker.ssl_url,
        token=Secret(secured_broker.tokens[VERIFIER]),
        timeout_s=3,
    )
    client = untrusted.pulsar_client(logger=_quiet())
    try:
        with pytest.raises(pulsar.PulsarException) as info:
            client.create_producer(topic)
        error = untrusted.failure(info.value)
    finally:
        client.close()
    OUTPUTS.append(str(error))
    assert isinstance(error, ClusterAccessError) and error.kind == "untrusted_certificate", error
    nobody = _verifier(secured_broker, token=Secret(secured_broker.tokens[NOBODY]))
    client = nobody.pulsar_client(logger=_quiet())
    try:
        with pytest.raises(pulsar.PulsarException) as info:
            client.subscribe(topic, SUB, consumer_type=pulsar.ConsumerType.KeyShared)
        error = nobody.failure(info.value)
    finally:
        client.close()
    OUTPUTS.append(str(error))
    assert error.kind == "forbidden" and "the role 'nobody' has no permission" in str(error)


def test_no_secret_shows_in_any_output(secured_broker: SecuredBroker) -> None:
    assert len(OUTPUTS) >= 12, "the tests above ran and kept their outputs"
    leaked = [s for s in secured_broker.secrets() for text in OUTPUTS if s in text]
    assert not leaked, f"{len(leaked)} secret(s) in the outputs"
