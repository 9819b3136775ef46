"""keyshared.connection: settings from client.conf and flags, tokens, TLS contexts, OAuth 2.0
client credentials, and the one-line failures, against small servers on 127.0.0.1 that the
tests start (plain HTTP, and HTTPS with certificates made here). No secret may show in any
message, repr, describe() or pickle."""

from __future__ import annotations

import argparse
import copy
import http.server
import json
import pickle
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.secure_broker import Pki

from keyshared.cli import main
from keyshared.connection import (
    FLAGS,
    ClusterConnection,
    HttpStatusError,
    Secret,
    add_arguments,
    from_arguments,
    read_client_conf,
    read_properties,
    token_from_env,
    token_from_file,
)
from keyshared.errors import ClusterAccessError, InvalidArgument, KeysharedError

STATS = Path(__file__).parents[1] / "fixtures" / "stats" / "held.json"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ2ZXJpZmllciJ9.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
STATS_PATH = "/admin/v2/persistent/public/default/t/stats"

# --- small servers --------------------------------------------------------------------------

#: A route's answer: status, body (bytes, or JSON), extra headers.
Answer = tuple[int, Any, dict[str, str]]


class Endpoint:
    """An HTTP server on 127.0.0.1 (HTTPS with ``tls``) answering each path by its route
    (``routes[path](request) -> (status, body, headers)``; 404 for others) and recording
    every request as ``{method, path, headers, body}``."""

    def __init__(
        self,
        routes: dict[str, Callable[[dict[str, Any]], Answer]],
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": self.rfile.read(length) if length else b"",
                }
                endpoint.requests.append(request)
                route = routes.get(self.path.split("?")[0])
                status, body, headers = route(request) if route else (404, b"", {})
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.localhost_url = f"{scheme}://localhost:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Callable[..., Endpoint]]:
    started: list[Endpoint] = []

    def start(routes: dict[str, Callable[[dict[str, Any]], Answer]], **kw: Any) -> Endpoint:
        started.append(Endpoint(routes, **kw))
        return started[-1]

    yield start
    for running in started:
        running.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def bearer_only(token: str, body: Any = None) -> Callable[[dict[str, Any]], Answer]:
    """A route that answers ``body`` to the bearer of ``token``, 401 to anyone else."""

    def route(request: dict[str, Any]) -> Answer:
        if request["headers"].get("Authorization") != f"Bearer {token}":
            return 401, {"reason": "Authentication required"}, {}
        return 200, body if body is not None else {"ok": True}, {}

    return route


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raised(call: Callable[[], object], cls: type[BaseException] = KeysharedError) -> Any:
    with pytest.raises(cls) as info:
        call()
    return info.value


# --- Java properties --------------------------------------------------------------------------


def test_java_properties_read_as_java_reads_them() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "   \n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d=\n"
        "  e  =  spaced value  \n"
        "f=one \\\n"
        "   two \\\n"
        "   three\n"
        "g=ends with a backslash\\\\\n"
        "h=tab\\there\\u0041\\:\n"
        "key\\ with\\ spaces=x\n"
        "i=a=b:c\n"
        "a=again\n"
        "# k=commented \\\n"
        "l=last\\"
    )
    assert read_properties(text) == {
        "a": "again",
        "b": "2",
        "c": "3",
        "d": "",
        "e": "spaced value  ",
        "f": "one two three",
        "g": "ends with a backslash\\",
        "h": "tab\thereA:",
        "key with spaces": "x",
        "i": "a=b:c",
        "l": "last",
    }


def test_java_properties_bytes_crlf_and_a_bad_escape() -> None:
    assert read_properties(b"\xef\xbb\xbfa=\xc3\xa9\r\nb=2\rc=3") == {"a": "é", "b": "2", "c": "3"}
    assert read_properties(b"a=\xe9") == {"a": "é"}  # ISO-8859-1, Java's own
    error = raised(lambda: read_properties("x=1\ny=\\u12", "client.conf"), InvalidArgument)
    assert "client.conf, line 2: malformed \\uxxxx escape" in str(error)


# --- client.conf ------------------------------------------------------------------------------


def write_conf(folder: Path, **props: str) -> Path:
    path = folder / "client.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def test_client_conf_gives_every_setting(tmp_path: Path, pki: Pki) -> None:
    cert, key = pki.client("verifier")
    conf = write_conf(
        tmp_path,
        webServiceUrl="https://localhost:8443/",
        brokerServiceUrl="pulsar+ssl://localhost:6651/",
        authPlugin="org.apache.pulsar.client.impl.auth.AuthenticationTls",
        authParams=f"tlsCertFile:{cert},tlsKeyFile:{key}",
        tlsTrustCertsFilePath=str(pki.ca),
        tlsAllowInsecureConnection="false",
        tlsEnableHostnameVerification="true",
        useKeyStoreTls="false",
    )
    c = ClusterConnection.from_client_conf(conf)
    assert (c.admin_url, c.service_url) == (
        "https://localhost:8443/",
        "pulsar+ssl://localhost:6651/",
    )
    assert (c.tls_cert, c.tls_key, c.tls_trust_certs) == (cert, key, pki.ca)
    assert (c.tls_allow_insecure, c.tls_hostname_verification, c.authentication) == (
        False,
        True,
        "tls",
    )
    assert c.flags["tls_trust_certs"] == f"tlsTrustCertsFilePath in {conf}"
    assert c.flags["tls_cert"] == f"tlsCertFile of authParams in {conf}"
    values, names = read_client_conf(conf)
    assert (values["admin_url"], names["admin_url"]) == (c.admin_url, f"webServiceUrl in {conf}")
    # Pulsar's default client.conf: empty values are not given, hostname checks off.
    default = write_conf(
        tmp_path,
        webServiceUrl="http://localhost:8080/",
        authPlugin="",
        authParams="",
        tlsEnableHostnameVerification="false",
        tlsTrustCertsFilePath="",
    )
    c = ClusterConnection.from_client_conf(default)
    assert (c.authentication, c.tls_trust_certs, c.tls_hostname_verification) == (
        "none",
        None,
        False,
    )


@pytest.mark.parametrize(
    "plugin",
    ["org.apache.pulsar.client.impl.auth.AuthenticationToken", "token", "TOKEN"],
)
def test_client_conf_reads_each_token_form(tmp_path: Path, plugin: str) -> None:
    token_file = tmp_path / "token.txt"
    token_file.write_text(f"  {TOKEN}\n")
    for params in (
        f"token:{TOKEN}",
        f"file://{token_file}",
        f"file:{token_file}",
        json.dumps({"token": TOKEN}),
        TOKEN,
    ):
        conf = write_conf(
            tmp_path, webServiceUrl="http://h:8080", authPlugin=plugin, authParams=params
        )
        c = ClusterConnection.from_client_conf(conf)
        assert c.token == Secret(TOKEN), params
        assert c.authentication == "token"
        assert TOKEN not in str(c.token_from)


def test_client_conf_reads_tls_params_as_json_and_oauth2(tmp_path: Path, pki: Pki) -> None:
    cert, key = pki.client("verifier")
    params = json.dumps({"tlsCertFile": str(cert), "tlsKeyFile": str(key)})
    conf = write_conf(tmp_path, authPlugin="tls", authParams=params)
    assert ClusterConnection.from_client_conf(conf).tls_cert == cert
    credentials = tmp_path / "credentials.json"
    credentials.write_text(json.dumps({"client_id": "id", "client_secret": "s3cr3t-value"}))
    oauth2 = {
        "issuerUrl": "https://issuer.example/",
        "privateKey": f"file://{credentials}",
        "audience": "urn:pulsar",
        "scope": "admin",
    }
    for plugin in ("org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2", "oauth2token"):
        conf = write_conf(tmp_path, authPlugin=plugin, authParams=json.dumps(oauth2))
        c = ClusterConnection.from_client_conf(conf)
        assert c.authentication == "oauth2"
        assert (c.oauth2_issuer_url, c.oauth2_credentials) == (
            "https://issuer.example/",
            credentials,
        )
        assert (c.oauth2_audience, c.oauth2_scope) == ("urn:pulsar", "admin")


def test_client_conf_errors_name_the_file_and_key(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.conf"
    error = raised(lambda: ClusterConnection.from_client_conf(missing))
    assert (error.kind, error.argument) == ("missing_file", "--client-conf")
    assert str(missing) in str(error)
    conf = write_conf(tmp_path, tlsTrustCertsFilePath="/no/such/ca.pem")
    error = raised(lambda: ClusterConnection.from_client_conf(conf))
    assert error.kind == "missing_file"
    assert str(error) == f"tlsTrustCertsFilePath in {conf}: no such file: /no/such/ca.pem"
    conf = write_conf(tmp_path, authPlugin="org.example.Kerberos", authParams="x")
    error = raised(lambda: ClusterConnection.from_client_conf(conf))
    assert error.argument == f"authPlugin in {conf}" and "not a plugin keyshared reads" in str(
        error
    )
    conf = write_conf(tmp_path, tlsAllowInsecureConnection="yes")
    assert "must be true or false" in str(raised(lambda: ClusterConnection.from_client_conf(conf)))
    conf = write_conf(tmp_path, authPlugin="tls", authParams="tlsCertFile:/x")
    assert "tlsCertFile and tlsKeyFile" in str(
        raised(lambda: ClusterConnection.from_client_conf(conf))
    )
    conf = write_conf(tmp_path, webServiceUrl="ftp://h")
    error = raised(lambda: ClusterConnection.from_client_conf(conf))
    assert error.argument == f"webServiceUrl in {conf}"


# --- flags ------------------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--admin-url")
    parser.add_argument("--service-url")
    parser.add_argument("--timeout", type=float, default=5.0)
    add_arguments(parser)
    return parser.parse_args(list(argv))


def connect(*argv: str) -> ClusterConnection:
    args = parse(*argv)
    return from_arguments(args, admin_url=args.admin_url, service_url=args.service_url)


def test_flags_override_client_conf_and_a_credential_flag_sets_its_auth_aside(
    tmp_path: Path, pki: Pki
) -> None:
    cert, key = pki.client("verifier")
    conf = write_conf(
        tmp_path,
        webServiceUrl="https://localhost:8443",
        brokerServiceUrl="pulsar+ssl://localhost:6651",
        authPlugin="token",
        authParams=f"token:{TOKEN}",
        tlsTrustCertsFilePath=str(pki.ca),
        tlsEnableHostnameVerification="true",
    )
    c = connect("--client-conf", str(conf))
    assert (c.admin_url, c.token, c.timeout_s) == ("https://localhost:8443", Secret(TOKEN), 5.0)
    c = connect("--client-conf", str(conf), "--admin-url", "https://other:8443", "--timeout", "2")
    assert (c.admin_url, c.service_url, c.timeout_s) == (
        "https://other:8443",
        "pulsar+ssl://localhost:6651",
        2.0,
    )
    assert c.flags["admin_url"] == "--admin-url"
    assert c.flags["service_url"] == f"brokerServiceUrl in {conf}"
    c = connect("--client-conf", str(conf), "--tls-cert", str(cert), "--tls-key", str(key))
    assert (c.authentication, c.token, c.tls_cert) == ("tls", None, cert)
    c = connect(
        "--client-conf", str(conf), "--tls-no-hostname-verification", "--tls-allow-insecure"
    )
    assert (c.tls_hostname_verification, c.tls_allow_insecure, c.token) == (
        False,
        True,
        Secret(TOKEN),
    )


def test_token_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    assert connect("--token", TOKEN).token == Secret(TOKEN)
    c = connect("--token-file", str(path))
    assert (c.token, c.token_from) == (Secret(TOKEN), f"--token-file ({path})")
    assert connect("--token-file", f"file://{path}").token == Secret(TOKEN)
    monkeypatch.setenv("PULSAR_TOKEN", TOKEN)
    c = connect("--token-env", "PULSAR_TOKEN")
    assert (c.token, c.token_from) == (Secret(TOKEN), "--token-env (PULSAR_TOKEN)")
    assert token_from_env("PULSAR_TOKEN") == token_from_file(path)
    with pytest.raises(SystemExit):  # one source at a time: argparse says so
        parse("--token", TOKEN, "--token-env", "PULSAR_TOKEN")


def test_flag_errors_name_the_flag_and_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_VARIABLE", raising=False)
    cases: list[tuple[tuple[str, ...], str, str]] = [
        (("--token-file", str(tmp_path / "none")), "--token-file", str(tmp_path / "none")),
        (("--token-env", "NO_SUCH_VARIABLE"), "--token-env", "NO_SUCH_VARIABLE"),
        (("--tls-trust-certs", "/no/ca.pem"), "--tls-trust-certs", "/no/ca.pem"),
        (("--tls-cert", str(STATS)), "--tls-key", "--tls-cert"),
        (("--oauth2-issuer-url", "https://i"), "--oauth2-credentials", "OAuth 2.0"),
        (("--admin-url", "localhost:8080"), "--admin-url", "http:// or https://"),
        (("--service-url", "http://h:6650"), "--service-url", "pulsar://"),
        (("--token", "two words"), "--token", "not a token"),
        (("--timeout", "0"), "--timeout", "> 0"),
    ]
    for argv, flag, said in cases:
        error = raised(lambda argv=argv: connect(*argv))  # type: ignore[misc]
        assert error.argument == flag, (argv, error)
        assert flag in str(error) and said in str(error), (argv, str(error))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert "is empty" in str(raised(lambda: connect("--token-file", str(empty))))
    credentials = tmp_path / "c.json"
    credentials.write_text("{}")
    error = raised(
        lambda: connect(
            "--token",
            TOKEN,
            "--oauth2-issuer-url",
            "https://i",
            "--oauth2-credentials",
            str(credentials),
        )
    )
    assert error.argument == "--token" and "not both" in str(error)


# --- Secret and describe() --------------------------------------------------------------------


def test_a_secret_never_shows() -> None:
    secret = Secret(TOKEN)
    assert (repr(secret), str(secret), f"{secret}", f"{secret:>5}") == (
        "Secret('***')",
        "***",
        "***",
        "  ***",
    )
    assert secret.reveal() == TOKEN and secret == Secret(TOKEN) and secret != Secret("other")
    assert copy.deepcopy(secret) is secret and copy.copy(secret) is secret
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(secret)
    c = ClusterConnection(admin_url="http://h:8080", token=secret, token_from="--token")
    assert TOKEN not in repr(c) and TOKEN not in str(c)
    with pytest.raises(TypeError):
        pickle.dumps(c)
    described = c.describe()
    assert described["token"] == "***" and described["authentication"] == "token"
    assert TOKEN not in json.dumps(described)
    assert c == ClusterConnection(
        admin_url="http://h:8080", token=Secret(TOKEN), token_from="--token"
    )
    assert hash(c) == hash(
        ClusterConnection(admin_url="http://h:8080", token=Secret(TOKEN), token_from="--token")
    )
    # Without a secret, a connection copies and pickles (what it learned stays behind).
    plain = ClusterConnection(admin_url="http://h:8080", timeout_s=3)
    assert pickle.loads(pickle.dumps(plain)) == copy.deepcopy(plain) == plain
    with_password = ClusterConnection(admin_url="https://user:hunter22@h:8443")
    assert "hunter22" not in json.dumps(with_password.describe())


def test_describe_shows_every_setting_but_secrets(tmp_path: Path, pki: Pki) -> None:
    cert, key = pki.client("verifier")
    c = ClusterConnection(
        admin_url="https://localhost:8443",
        service_url="pulsar+ssl://localhost:6651",
        tls_cert=cert,
        tls_key=key,
        tls_trust_certs=pki.ca,
        timeout_s=3,
    )
    assert c.describe() == {
        "admin_url": "https://localhost:8443",
        "service_url": "pulsar+ssl://localhost:6651",
        "authentication": "tls",
        "token": None,
        "token_from": None,
        "tls_cert": str(cert),
        "tls_key": str(key),
        "oauth2_issuer_url": None,
        "oauth2_credentials": None,
        "oauth2_audience": None,
        "oauth2_scope": None,
        "tls_trust_certs": str(pki.ca),
        "tls_allow_insecure": False,
        "tls_hostname_verification": True,
        "timeout_s": 3.0,
    }
    key_text = key.read_text()
    assert key_text not in json.dumps(c.describe())


def test_a_child_process_gets_the_same_connection() -> None:
    c = ClusterConnection(
        admin_url="http://h:8080", token=Secret(TOKEN), flags={**FLAGS, "admin_url": "--url"}
    )
    child = json.loads(json.dumps(c.to_child()))
    again = ClusterConnection.from_child(child)
    assert again == c and again.flags["admin_url"] == "--url"


# --- TLS settings -----------------------------------------------------------------------------


def test_the_ssl_context_checks_the_host_name_unless_told_and_everything_unless_insecure(
    pki: Pki,
) -> None:
    default = ClusterConnection(tls_trust_certs=pki.ca).ssl_context()
    assert (default.check_hostname, default.verify_mode) == (True, ssl.CERT_REQUIRED)
    assert [c["subject"] for c in default.get_ca_certs()] == [
        ((("commonName", "keyshared test CA"),),)
    ]
    lax = ClusterConnection(tls_hostname_verification=False).ssl_context()
    assert (lax.check_hostname, lax.verify_mode) == (False, ssl.CERT_REQUIRED)
    insecure = ClusterConnection(tls_allow_insecure=True).ssl_context()
    assert (insecure.check_hostname, insecure.verify_mode) == (False, ssl.CERT_NONE)
    bad = ClusterConnection(tls_trust_certs=STATS)
    error = raised(bad.ssl_context)
    assert error.argument == "--tls-trust-certs" and "holds no PEM certificate" in str(error)
    cert, _ = pki.client("verifier")
    mismatched = ClusterConnection(tls_cert=cert, tls_key=pki.server_key)
    assert "not a PEM certificate and its private key" in str(raised(mismatched.ssl_context))


# --- the admin endpoint and its failures ---------------------------------------------------------


def test_admin_sends_the_token_and_json_and_follows_a_brokers_redirect(
    endpoint: Callable[..., Endpoint],
) -> None:
    owner = endpoint({"/admin/v2/persistent/public/default/t": lambda r: (204, b"", {})})
    first = endpoint(
        {
            "/admin/v2/persistent/public/default/t": lambda r: (
                307,
                b"",
                {"Location": f"{owner.url}/admin/v2/persistent/public/default/t"},
            ),
            STATS_PATH: bearer_only(TOKEN, {"subscriptions": {}}),
        }
    )
    c = ClusterConnection(admin_url=first.url, token=Secret(TOKEN))
    assert c.admin_json("GET", STATS_PATH) == {"subscriptions": {}}
    assert c.admin("PUT", "/admin/v2/persistent/public/default/t", {"a": 1}) == b""
    (moved,) = owner.requests
    assert (moved["method"], moved["body"]) == ("PUT", b'{"a": 1}')
    assert moved["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert moved["headers"]["Host"] == f"127.0.0.1:{owner.port}"
    # A whole URL on another host gets no credentials.
    with pytest.raises(HttpStatusError):
        c.admin("GET", f"{owner.url}/elsewhere")
    assert "Authorization" not in owner.requests[-1]["headers"]


def test_401_and_403_are_one_line_each_saying_what_to_do(endpoint: Callable[..., Endpoint]) -> None:
    def forbidden(request: dict[str, Any]) -> Answer:
        return 403, {"reason": "Don't have permission to administrate resources on this tenant"}, {}

    admin = endpoint(
        {
            STATS_PATH: bearer_only("another"),
            "/admin/v2/persistent/public/default/u/stats": forbidden,
        }
    )
    error = raised(
        lambda: ClusterConnection(admin_url=admin.url).admin("GET", STATS_PATH), ClusterAccessError
    )
    assert (error.kind, error.argument, error.status) == ("unauthorized", "--token", 401)
    assert str(error) == (
        f"{admin.url}{STATS_PATH}: HTTP 401: the cluster refused the credentials"
        " (Authentication required): none were given; give a token with"
        " --token/--token-file/--token-env or --client-conf"
    )
    c = ClusterConnection(admin_url=admin.url, token=Secret(TOKEN), token_from="--token-env (T)")
    error = raised(lambda: c.admin("GET", STATS_PATH), ClusterAccessError)
    assert "refused the credentials (the token of --token-env (T))" in str(error)
    assert TOKEN not in str(error)
    error = raised(
        lambda: c.admin("GET", "/admin/v2/persistent/public/default/u/stats"), ClusterAccessError
    )
    assert (error.kind, error.status) == ("forbidden", 403)
    assert str(error).startswith(
        f"{admin.url}/admin/v2/persistent/public/default/u/stats: HTTP 403: the role 'verifier'"
        " has no permission for persistent://public/default/u (Don't have permission"
    )
    assert "grant-permission public/default --role verifier" in str(error)
    assert str(error).endswith("or use another token") and "\n" not in str(error)


def test_pulsars_401_to_a_known_role_without_permission_is_a_missing_permission(
    endpoint: Callable[..., Endpoint],
) -> None:
    reason = "Unauthorized to validateTopicOperation for operation [GET_STATS] on topic [t]"
    admin = endpoint({STATS_PATH: lambda r: (401, {"reason": reason}, {})})
    c = ClusterConnection(admin_url=admin.url, token=Secret(TOKEN))
    error = raised(lambda: c.admin("GET", STATS_PATH), ClusterAccessError)
    assert (error.kind, error.status, error.argument) == ("forbidden", 401, "--token")
    said = "HTTP 401: the role 'verifier' has no permission for persistent://public/default/t"
    assert f"{said} ({reason})" in str(error)
    # Without credentials, the same answer asks for them.
    error = raised(lambda: ClusterConnection(admin_url=admin.url).admin("GET", STATS_PATH))
    assert error.kind == "unauthorized"


def test_nothing_listening_and_no_answer_in_time(endpoint: Callable[..., Endpoint]) -> None:
    port = closed_port()
    c = ClusterConnection(admin_url=f"http://127.0.0.1:{port}", timeout_s=2)
    error = raised(lambda: c.admin("GET", STATS_PATH), ClusterAccessError)
    assert (error.kind, error.argument) == ("connection_refused", "--admin-url")
    assert str(error) == f"http://127.0.0.1:{port}{STATS_PATH}: [Errno 111] Connection refused"

    def slow(request: dict[str, Any]) -> Answer:
        time.sleep(2)
        return 200, {}, {}

    admin = endpoint({STATS_PATH: slow})
    started = time.monotonic()
    error = raised(
        lambda: ClusterConnection(admin_url=admin.url, timeout_s=0.5).admin("GET", STATS_PATH)
    )
    assert time.monotonic() - started < 1.5
    assert (error.kind, str(error)) == (
        "timed_out",
        f"{admin.url}{STATS_PATH}: no complete answer within 0.5 s",
    )


def test_tls_failures_are_one_line_each(endpoint: Callable[..., Endpoint], pki: Pki) -> None:
    admin = endpoint({STATS_PATH: lambda r: (200, {"ok": 1}, {})}, tls=pki.server_context())
    good = ClusterConnection(admin_url=admin.localhost_url, tls_trust_certs=pki.ca)
    assert good.admin_json("GET", STATS_PATH) == {"ok": 1}
    untrusted = ClusterConnection(admin_url=admin.localhost_url)
    error = raised(lambda: untrusted.admin("GET", STATS_PATH), ClusterAccessError)
    assert (error.kind, error.argument) == ("untrusted_certificate", "--tls-trust-certs")
    assert "the broker's certificate is not signed by a trusted CA" in str(error)
    assert str(error).endswith("give the CA that signed it with --tls-trust-certs")
    by_address = ClusterConnection(admin_url=admin.url, tls_trust_certs=pki.ca)
    error = raised(lambda: by_address.admin("GET", STATS_PATH), ClusterAccessError)
    assert (error.kind, error.argument) == ("hostname_mismatch", "--tls-no-hostname-verification")
    assert str(error) == (
        f"{admin.url}{STATS_PATH}: the certificate is for localhost, not 127.0.0.1: connect by"
        " that name, or give --tls-no-hostname-verification"
    )
    lax = ClusterConnection(
        admin_url=admin.url, tls_trust_certs=pki.ca, tls_hostname_verification=False
    )
    assert lax.admin_json("GET", STATS_PATH) == {"ok": 1}
    insecure = ClusterConnection(admin_url=admin.url, tls_allow_insecure=True)
    assert insecure.admin_json("GET", STATS_PATH) == {"ok": 1}
    plain = endpoint({STATS_PATH: lambda r: (200, {}, {})})
    error = raised(
        lambda: ClusterConnection(admin_url=plain.url.replace("http:", "https:")).admin(
            "GET", STATS_PATH
        )
    )
    assert error.kind == "tls_failed" and "does not speak TLS" in str(error)


def test_mutual_tls_shows_the_client_certificate(
    endpoint: Callable[..., Endpoint], pki: Pki
) -> None:
    admin = endpoint({STATS_PATH: lambda r: (200, {"ok": 1}, {})}, tls=pki.server_context(True))
    cert, key = pki.client("verifier")
    c = ClusterConnection(
        admin_url=admin.localhost_url, tls_trust_certs=pki.ca, tls_cert=cert, tls_key=key
    )
    assert c.authentication == "tls" and c.admin_json("GET", STATS_PATH) == {"ok": 1}
    without = ClusterConnection(admin_url=admin.localhost_url, tls_trust_certs=pki.ca)
    error = raised(lambda: without.admin("GET", STATS_PATH), OSError)
    assert isinstance(error, ClusterAccessError)
    assert error.kind in ("tls_failed", "unreachable"), str(error)


def test_failure_names_what_the_pulsar_client_could_not_do(
    endpoint: Callable[..., Endpoint], pki: Pki
) -> None:
    class ConnectError(Exception):
        pass

    class AuthenticationError(Exception):
        pass

    class AuthorizationError(Exception):
        pass

    port = closed_port()
    c = ClusterConnection(
        service_url=f"pulsar+ssl://localhost:{port}", tls_trust_certs=pki.ca, timeout_s=2
    )
    error = c.failure(ConnectError("Pulsar error: ConnectError"))
    assert (error.kind, str(error)) == (
        "connection_refused",
        f"nothing listens at localhost:{port}: check --service-url",
    )
    tls = endpoint({}, tls=pki.server_context())
    by_address = ClusterConnection(
        service_url=f"pulsar+ssl://127.0.0.1:{tls.port}", tls_trust_certs=pki.ca
    )
    error = by_address.failure(ConnectError("Pulsar error: ConnectError"))
    assert (
        error.kind == "hostname_mismatch"
        and "the certificate is for localhost, not 127.0.0.1" in str(error)
    )
    untrusted = ClusterConnection(service_url=f"pulsar+ssl://localhost:{tls.port}")
    assert untrusted.failure(ConnectError("x")).kind == "untrusted_certificate"
    with_token = ClusterConnection(service_url="pulsar+ssl://localhost:1", token=Secret(TOKEN))
    error = with_token.failure(AuthenticationError(f"refused {TOKEN}"))
    assert error.kind == "unauthorized" and TOKEN not in str(error)
    error = with_token.failure(AuthorizationError("Pulsar error: AuthorizationError"))
    assert error.kind == "forbidden" and "the role 'verifier' has no permission" in str(error)


# --- OAuth 2.0 ----------------------------------------------------------------------------------


def issuer(endpoint: Callable[..., Endpoint], secret: str, lifetime_s: float = 3600) -> Endpoint:
    """An OAuth 2.0 issuer granting an access token per client-credentials request of
    client ``id`` with ``secret``; it echoes what it was sent in a refusal, secret and all."""
    granted: list[str] = []

    def metadata(request: dict[str, Any]) -> Answer:
        return 200, {"issuer": server.url, "token_endpoint": f"{server.url}/oauth/token"}, {}

    def token(request: dict[str, Any]) -> Answer:
        form = dict(p.split("=", 1) for p in request["body"].decode().split("&"))
        if form.get("client_id") != "id" or form.get("client_secret") != secret:
            said = f"bad client credentials {form.get('client_secret')}"
            return 401, {"error": "invalid_client", "error_description": said}, {}
        granted.append(f"access-{len(granted)}-{secret}")
        return (
            200,
            {"access_token": granted[-1], "expires_in": lifetime_s, "token_type": "Bearer"},
            {},
        )

    server = endpoint({"/.well-known/openid-configuration": metadata, "/oauth/token": token})
    server.granted = granted  # type: ignore[attr-defined]
    return server


def test_oauth2_client_credentials_are_granted_once_and_cached(
    endpoint: Callable[..., Endpoint], tmp_path: Path
) -> None:
    secret = "client-secret-value-42"
    idp = issuer(endpoint, secret)
    credentials = tmp_path / "credentials.json"
    credentials.write_text(json.dumps({"client_id": "id", "client_secret": secret}))

    def cluster_route(request: dict[str, Any]) -> Answer:
        said = request["headers"].get("Authorization", "")
        return (200, {"ok": True}, {}) if said.startswith("Bearer access-") else (401, b"", {})

    admin = endpoint({STATS_PATH: cluster_route})
    c = ClusterConnection(
        admin_url=admin.url,
        oauth2_issuer_url=idp.url,
        oauth2_credentials=credentials,
        oauth2_audience="urn:pulsar",
        oauth2_scope="admin",
    )
    assert c.admin_json("GET", STATS_PATH) == {"ok": True}
    assert c.admin_json("GET", STATS_PATH) == {"ok": True}
    grants = [r for r in idp.requests if r["path"] == "/oauth/token"]
    assert len(grants) == 1
    form = dict(p.split("=", 1) for p in grants[0]["body"].decode().split("&"))
    assert form == {
        "grant_type": "client_credentials",
        "client_id": "id",
        "client_secret": secret,
        "audience": "urn%3Apulsar",
        "scope": "admin",
    }
    assert admin.requests[0]["headers"]["Authorization"] == f"Bearer access-0-{secret}"
    # A token whose lifetime is spent is asked for again (at 90% of it, as Pulsar does).
    short = issuer(endpoint, secret, lifetime_s=0.01)
    c = ClusterConnection(
        admin_url=admin.url, oauth2_issuer_url=short.url, oauth2_credentials=credentials
    )
    c.admin("GET", STATS_PATH)
    time.sleep(0.05)
    c.admin("GET", STATS_PATH)
    assert len(short.granted) == 2  # type: ignore[attr-defined]


def test_a_refused_grant_is_one_line_without_the_secret(
    endpoint: Callable[..., Endpoint], tmp_path: Path
) -> None:
    wrong = "the-wrong-secret-0042"
    idp = issuer(endpoint, "the-right-secret")
    credentials = tmp_path / "credentials.json"
    credentials.write_text(json.dumps({"client_id": "id", "client_secret": wrong}))
    c = ClusterConnection(
        admin_url="http://127.0.0.1:1", oauth2_issuer_url=idp.url, oauth2_credentials=credentials
    )
    error = raised(lambda: c.admin("GET", STATS_PATH), ClusterAccessError)
    assert (error.kind, error.argument, error.status) == (
        "oauth2_refused",
        "--oauth2-credentials",
        401,
    )
    assert wrong not in str(error) and "\n" not in str(error)
    assert str(error) == (
        f"{idp.url}/oauth/token: HTTP 401: the issuer refused the client credentials"
        " (invalid_client: bad client credentials ***): check --oauth2-credentials,"
        " --oauth2-audience and --oauth2-scope"
    )
    credentials.write_text("{not json, " + wrong)
    error = raised(lambda: c.admin("GET", STATS_PATH))
    assert error.argument == "--oauth2-credentials" and wrong not in str(error)


# --- the Pulsar client --------------------------------------------------------------------------


def test_pulsar_client_gets_the_same_settings(monkeypatch: pytest.MonkeyPatch, pki: Pki) -> None:
    import pulsar

    made: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(pulsar, "Client", lambda url, **kw: made.append((url, kw)))
    c = ClusterConnection(
        service_url="pulsar+ssl://localhost:6651",
        token=Secret(TOKEN),
        tls_trust_certs=pki.ca,
        timeout_s=5,
    )
    c.pulsar_client(io_threads=2)
    ((url, options),) = made
    assert url == "pulsar+ssl://localhost:6651"
    assert isinstance(options.pop("authentication"), pulsar.AuthenticationToken)
    assert options == {
        "connection_timeout_ms": 5000,
        "operation_timeout_seconds": 5,
        "tls_allow_insecure_connection": False,
        "tls_validate_hostname": True,
        "tls_trust_certs_file_path": str(pki.ca),
        "io_threads": 2,
    }
    cert, key = pki.client("verifier")
    ClusterConnection(service_url="pulsar+ssl://h:6651", tls_cert=cert, tls_key=key).pulsar_client()
    assert isinstance(made[-1][1]["authentication"], pulsar.AuthenticationTLS)
    error = raised(lambda: ClusterConnection().pulsar_client())
    assert error.argument == "--service-url"


def test_without_the_pulsar_client_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pulsar", None)
    error = raised(lambda: ClusterConnection(service_url="pulsar://h:6650").pulsar_client())
    assert "pip install 'keyshared[verify]'" in str(error)


# --- explain --------------------------------------------------------------------------------------


def test_explain_reads_the_url_and_token_from_client_conf(
    endpoint: Callable[..., Endpoint], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stats = json.loads(STATS.read_text())
    admin = endpoint({STATS_PATH: bearer_only(TOKEN, stats)})
    conf = write_conf(
        tmp_path, webServiceUrl=admin.url, authPlugin="token", authParams=f"token:{TOKEN}"
    )
    argv = ["explain", "--topic", "t", "--subscription", "sub", "--max-unacked", "0"]
    assert main([*argv, "--client-conf", str(conf), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["subscription"] == "sub"
    assert main([*argv, "--url", admin.url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HTTP 401: the cluster refused the credentials" in err
    assert main(["explain", str(STATS), "--subscription", "sub", "--token", TOKEN]) == 2
    err = capsys.readouterr().err
    assert "--token is for --url or --client-conf" in err and TOKEN not in err


# --- no secret anywhere ---------------------------------------------------------------------


@settings(max_examples=25)
@given(
    secret=st.text(
        alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.",
        min_size=12,
        max_size=60,
    )
)
def test_no_secret_shows_in_any_message_repr_or_describe(secret: str) -> None:
    port = closed_port()
    c = ClusterConnection(
        admin_url=f"http://127.0.0.1:{port}",
        service_url=f"pulsar://127.0.0.1:{port}",
        token=Secret(secret),
        timeout_s=1,
    )
    said = [repr(c), str(c), json.dumps(c.describe()), repr(c.token), str(c.token)]
    error = raised(lambda: c.admin("GET", STATS_PATH), ClusterAccessError)
    said += [str(error), repr(error)]
    for wrapped in (RuntimeError(f"failed with {secret}"), OSError(f"{secret} refused")):
        failure = c.failure(wrapped)
        said += [str(failure), repr(failure)]
    bad = raised(lambda: ClusterConnection(token=Secret(secret + " \n")))
    said.append(str(bad))
    assert not [s for s in said if secret in s]
