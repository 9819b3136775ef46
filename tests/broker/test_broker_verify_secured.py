"""``keyshared verify`` on a secured 4.2.4 broker (token authentication and authorization, TLS
on both ports, certificates and tokens made by the test: tests/support/secure_broker.py).

With the right token and CA, given as flags or as pulsar-admin's ``client.conf``, every
delivery is checked as on an open broker; with mutual TLS too. Each wrong setting gives one
line saying what to change, exit 2, no traceback and no topic left behind; no secret reaches
the output, the ``--json`` record or a report.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from support.secure_broker import NOBODY, VERIFIER, SecuredBroker
from support.verify_cli import why

from keyshared.cli import main

WORKLOAD = ["--messages", "120", "--keys", "20", "--duration", "60"]


def verify(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["verify", *WORKLOAD, *args], out)
    return status, out.getvalue(), err.getvalue()


def urls(broker: SecuredBroker) -> list[str]:
    return ["--service-url", broker.ssl_url, "--admin-url", broker.https_url]


def topics(broker: SecuredBroker) -> list[str]:
    names: list[str] = broker.admin("persistent/public/default")
    return names


@pytest.fixture
def client_conf(secured_broker: SecuredBroker, tmp_path: Path) -> Path:
    """pulsar-admin's client.conf for the verifier role, its token in a file."""
    conf = tmp_path / "client.conf"
    conf.write_text(
        f"webServiceUrl={secured_broker.https_url}\n"
        f"brokerServiceUrl={secured_broker.ssl_url}\n"
        "authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n"
        f"authParams=file://{secured_broker.token_file(VERIFIER)}\n"
        f"tlsTrustCertsFilePath={secured_broker.ca}\n"
        "tlsEnableHostnameVerification=true\n"
    )
    return conf


def no_secret_in(broker: SecuredBroker, *texts: str) -> None:
    for secret in broker.secrets():
        for text in texts:
            assert secret not in text


def test_verified_with_a_token_and_the_ca(secured_broker: SecuredBroker, tmp_path: Path) -> None:
    report = tmp_path / "report"
    status, out, err = verify(
        *urls(secured_broker),
        "--token",
        secured_broker.tokens[VERIFIER],
        "--tls-trust-certs",
        str(secured_broker.ca),
        "--scenario",
        "join",
        "--json",
        "--report",
        str(report),
    )
    assert status == 0, why(out, err)
    verdict = json.loads(out)["verdict"]
    (join,) = verdict["scenarios"]
    assert join["lost"] == 0 and join["predicted"] == join["matched"] >= join["sent"]
    written = "".join(p.read_text(errors="replace") for p in report.iterdir())
    no_secret_in(secured_broker, out, err, written)


def test_verified_from_client_conf(secured_broker: SecuredBroker, client_conf: Path) -> None:
    status, out, err = verify("--client-conf", str(client_conf), "--scenario", "leave")
    assert status == 0, why(out, err)
    assert out.startswith("PASS")
    no_secret_in(secured_broker, out, err)


def test_verified_with_mutual_tls(secured_broker: SecuredBroker) -> None:
    cert, key = secured_broker.client_cert
    status, out, err = verify(
        *urls(secured_broker),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--tls-trust-certs",
        str(secured_broker.ca),
        "--scenario",
        "steady",
    )
    assert status == 0, why(out, err)


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        ("no token", "--token"),
        ("a token without permission", "permission"),
        ("an unknown CA", "--tls-trust-certs"),
        ("the wrong host name", "localhost"),
    ],
)
def test_a_wrong_setting_gives_one_line(
    secured_broker: SecuredBroker, wrong: str, said: str
) -> None:
    before = set(topics(secured_broker))
    token = ["--token", secured_broker.tokens[VERIFIER]]
    ca = ["--tls-trust-certs", str(secured_broker.ca)]
    args = {
        "no token": [*urls(secured_broker), *ca],
        "a token without permission": [
            *urls(secured_broker),
            *ca,
            "--token",
            secured_broker.tokens[NOBODY],
        ],
        "an unknown CA": [*urls(secured_broker), *token],
        "the wrong host name": [
            "--service-url",
            secured_broker.ssl_url.replace("localhost", "127.0.0.1"),
            "--admin-url",
            secured_broker.https_url.replace("localhost", "127.0.0.1"),
            *token,
            *ca,
        ],
    }[wrong]
    status, out, err = verify(*args, "--scenario", "steady")
    assert status == 2, why(out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert said in lines[0] and "Traceback" not in err
    assert set(topics(secured_broker)) == before
    no_secret_in(secured_broker, out, err)
