"""What went wrong in reaching a cluster, as one line saying what to change: the errors of
the admin endpoint (:class:`AnswerError`, :class:`HttpStatusError`), the
:class:`~keyshared.errors.ClusterAccessError` of each refusal (an HTTP 401 or 403, an
untrusted certificate, a certificate for another host name, nothing listening, a Pulsar
client's exception), and every secret a connection holds scrubbed from what they say."""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import urllib.error
import urllib.parse

from keyshared.connection.secret import safe_url
from keyshared.connection.settings import Settings
from keyshared.connection.tls import (
    HOSTNAME_MISMATCH,
    UNTRUSTED,
    certificate_names,
    context,
    ssl_reason,
    verify_code,
)
from keyshared.errors import ClusterAccessError
from keyshared.explain.stats import shown

# What to do about refused credentials, whichever way they were given.
_GIVE_TOKEN = "give a token with --token/--token-file/--token-env or --client-conf"
# Secrets shorter than this are not searched for in messages: they would match ordinary text.
_SHORTEST_SCRUBBED = 4
# What Pulsar's reason says when a role it authenticated lacks a permission.
_PERMISSION = re.compile(r"unauthorized to|not authorized|permission", re.IGNORECASE)


class AnswerError(OSError):
    """The broker's admin endpoint was reached but gave no whole answer: an HTTP error
    (:class:`HttpStatusError`), or a connection closed before the body was complete. The
    other OSErrors of a request say that it could not be reached, or gave no answer within
    the timeout (:class:`~keyshared.errors.ClusterAccessError`)."""


class HttpStatusError(AnswerError):
    """The broker answered with an HTTP error ``code``; the message ends with the reason
    its answer gives, when it gives one."""

    def __init__(self, address: str, code: int, reason: str, detail: str | None = None) -> None:
        said = "" if not detail else f": {shown(detail, 200)}"
        super().__init__(f"{address}: HTTP {code} {reason}{said}")
        self.code = code


def error_detail(body: bytes) -> str | None:
    """What an error answer says: the ``reason`` of Pulsar's JSON, the ``Message:`` line of
    the page an unexpected exception gives, or an OAuth 2.0 issuer's ``error`` and
    ``error_description`` (RFC 6749 5.2); None for anything else (a proxy's HTML page is no
    reason)."""
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("reason"), str):
        return data["reason"].strip() or None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        description = data.get("error_description")
        said = f"{data['error']}: {description}" if isinstance(description, str) else data["error"]
        return said.strip() or None
    for line in text.splitlines():
        if line.startswith("Message: "):
            return line.removeprefix("Message: ").strip() or None
    return None


def scrub(connection: Settings, text: str) -> str:
    """``text`` with every secret ``connection`` holds replaced by ``***``."""
    state = connection._state
    with state.lock:
        secrets = sorted(set(state.secrets), key=len, reverse=True)
    for secret in secrets:
        if len(secret) >= _SHORTEST_SCRUBBED:
            text = text.replace(secret, "***")
    return text


# --- an admin REST request -------------------------------------------------------------------


def request_failure(
    connection: Settings,
    result: BaseException | None,
    address: str,
    purpose: str,
    url_flag: str,
    what: str,
    detail: str | None,
    names: list[str],
) -> BaseException:
    """What to raise for a request to ``address`` (for ``purpose``: ``"cluster"`` or
    ``"issuer"``) that ended in ``result`` (None: not within ``timeout_s``), whose answer
    said ``detail``; ``url_flag`` names the setting of its address, ``what`` the request in
    a 403's message, ``names`` what the certificate is for, when known."""
    late = ClusterAccessError(
        f"{address}: no complete answer within {connection.timeout_s:g} s",
        kind="timed_out",
        argument=url_flag,
    )
    if result is None:
        return late
    reason = result.reason if isinstance(result, urllib.error.URLError) else result
    if isinstance(reason, TimeoutError):
        # urllib's socket timeout is the same span and may fire first: the same failure.
        return late
    if isinstance(result, urllib.error.HTTPError):
        return _http_failure(connection, result, address, purpose, what, detail)
    if isinstance(reason, ssl.SSLError):
        host = urllib.parse.urlsplit(address).hostname or ""
        return _tls_failure(connection, reason, address, host, url_flag, names)
    if isinstance(reason, ConnectionRefusedError):
        return ClusterAccessError(
            scrub(connection, f"{address}: {reason}"),
            kind="connection_refused",
            argument=url_flag,
        )
    if isinstance(result, urllib.error.URLError):
        return ClusterAccessError(
            scrub(connection, f"{address}: {result.reason}"), kind="unreachable", argument=url_flag
        )
    if isinstance(result, http.client.IncompleteRead):
        got = len(result.partial)
        of = "" if result.expected is None else f" of {got + result.expected}"
        return AnswerError(f"{address}: the connection closed after {got}{of} bytes of the answer")
    if isinstance(result, OSError | http.client.HTTPException):
        return OSError(scrub(connection, f"{address}: {result}"))
    if scrub(connection, str(result)) != str(result):
        return OSError(scrub(connection, f"{address}: {type(result).__name__}: {result}"))
    return result


def _http_failure(
    connection: Settings,
    error: urllib.error.HTTPError,
    address: str,
    purpose: str,
    what: str,
    detail: str | None,
) -> BaseException:
    """An HTTP error's failure: an issuer's refusal of the client credentials, a 401 or
    403, else :class:`HttpStatusError`."""
    said = None if detail is None else scrub(connection, detail)
    if purpose == "issuer" and error.code in (400, 401):
        flags = connection.flags
        return ClusterAccessError(
            f"{address}: HTTP {error.code}: the issuer refused the client"
            f" credentials{_quoted(said)}: check {flags['oauth2_credentials']},"
            f" {flags['oauth2_audience']} and {flags['oauth2_scope']}",
            kind="oauth2_refused",
            argument=flags["oauth2_credentials"],
            status=error.code,
        )
    if error.code in (401, 403):
        return _refusal(connection, address, error.code, what, said)
    return HttpStatusError(address, error.code, str(error.reason), said)


def _refusal(
    connection: Settings, address: str, status: int, what: str, said: str | None
) -> ClusterAccessError:
    """The one line of a 401 or 403 (``status``) to the request ``what``, whose answer
    gave the reason ``said``."""
    code = status
    authentication = connection.authentication
    # Pulsar answers 401 to a role it knows but does not allow, with a reason ("Unauthorized
    # to validateTopicOperation ..."); refused credentials come with none of its own.
    if code == 401 and said is not None and authentication != "none":
        code = 403 if _PERMISSION.search(said) else code
    if code == 401:
        if authentication == "none":
            return ClusterAccessError(
                f"{address}: HTTP 401: the cluster refused the credentials{_quoted(said)}:"
                f" none were given; {_GIVE_TOKEN}",
                kind="unauthorized",
                argument=connection.flags["token"],
                status=401,
            )
        return ClusterAccessError(
            f"{address}: HTTP 401: the cluster refused the credentials"
            f" ({_credentials_said(connection)}){_quoted(said)}: give ones it accepts;"
            f" {_GIVE_TOKEN}",
            kind="unauthorized",
            argument=_credentials_flag(connection),
            status=401,
        )
    role = connection.role()
    return ClusterAccessError(
        f"{address}: HTTP {status}: {_the_role(role)} has no permission for {_resource(what)}"
        f"{_quoted(said)}: grant it {_grant(what, role)} or use another token",
        kind="forbidden",
        argument=_credentials_flag(connection),
        status=status,
    )


def _quoted(said: str | None) -> str:
    """What an answer said, in parentheses after a space; nothing when it said nothing."""
    return "" if said is None else f" ({shown(said, 200)})"


def _the_role(role: str | None) -> str:
    return "the role" if role is None else f"the role {role!r}"


def _credentials_said(connection: Settings) -> str:
    if connection.authentication == "token":
        return f"the token of {connection.token_from or connection.flags['token']}"
    if connection.authentication == "oauth2":
        return f"the access token of {connection.oauth2_issuer_url}"
    return f"the client certificate {connection.tls_cert}"


def _credentials_flag(connection: Settings) -> str:
    return connection.flags[
        {"oauth2": "oauth2_credentials", "tls": "tls_cert"}.get(connection.authentication, "token")
    ]


def _resource(what: str) -> str:
    """What an admin path is about, in Pulsar's words (``persistent://t/ns/x``)."""
    parts = urllib.parse.urlsplit(what).path.strip("/").split("/")
    if parts[:2] == ["admin", "v2"]:
        parts = parts[2:]
    if len(parts) >= 4 and parts[0] in ("persistent", "non-persistent"):
        return f"{parts[0]}://{parts[1]}/{parts[2]}/{parts[3]}"
    if len(parts) >= 4 and parts[0] in ("scalable", "segments"):
        return f"topic://{parts[1]}/{parts[2]}/{parts[3]}"
    if len(parts) >= 3 and parts[0] == "namespaces":
        return f"namespace {parts[1]}/{parts[2]}"
    if len(parts) >= 2 and parts[0] == "tenants":
        return f"tenant {parts[1]}"
    return what or "this request"


def _grant(what: str, role: str | None) -> str:
    """How to grant ``role`` what a request on ``what`` needs."""
    parts = urllib.parse.urlsplit(what).path.strip("/").split("/")[2:]
    role_said = role or "ROLE"
    if len(parts) >= 3 and parts[0] in ("persistent", "non-persistent", "scalable", "segments"):
        tenant, namespace = parts[1], f"{parts[1]}/{parts[2]}"
        return (
            f"(pulsar-admin namespaces grant-permission {namespace} --role {role_said}"
            f" --actions produce,consume, or make it an admin of tenant {tenant})"
        )
    return f"(make {role_said} an admin of the tenant, or grant it the namespace's permissions)"


# --- TLS -------------------------------------------------------------------------------------


def _tls_failure(
    connection: Settings,
    error: ssl.SSLError,
    where: str,
    host: str,
    url_flag: str,
    names: list[str],
) -> ClusterAccessError:
    """The one line of a TLS handshake with ``host`` (at ``where``, given by
    ``url_flag``) that failed; ``names``: what the certificate is for, when known."""
    flags = connection.flags
    code = verify_code(error)
    if code in HOSTNAME_MISMATCH:
        names_said = " and ".join(names) if names else "another host name"
        return ClusterAccessError(
            f"{where}: the certificate is for {names_said}, not {host}: connect by that"
            f" name, or give {flags['tls_hostname_verification']}",
            kind="hostname_mismatch",
            argument=flags["tls_hostname_verification"],
        )
    if isinstance(error, ssl.SSLCertVerificationError):
        said = error.verify_message or ssl_reason(error)
        if code in UNTRUSTED:
            by = (
                "a trusted CA"
                if connection.tls_trust_certs is None
                else f"a CA of {flags['tls_trust_certs']} {connection.tls_trust_certs}"
            )
            return ClusterAccessError(
                f"{where}: the broker's certificate is not signed by {by} ({said}): give"
                f" the CA that signed it with {flags['tls_trust_certs']}",
                kind="untrusted_certificate",
                argument=flags["tls_trust_certs"],
            )
        return ClusterAccessError(
            f"{where}: the broker's certificate is refused ({said}): renew it, or give"
            f" {flags['tls_allow_insecure']} to accept it anyway",
            kind="untrusted_certificate",
            argument=flags["tls_trust_certs"],
        )
    reason = ssl_reason(error)
    if "WRONG_VERSION_NUMBER" in reason or "record layer failure" in reason:
        return ClusterAccessError(
            f"{where}: the server there does not speak TLS ({reason}): give its https://"
            " or pulsar+ssl:// port, or an http:// or pulsar:// URL",
            kind="tls_failed",
            argument=url_flag,
        )
    if "CERTIFICATE_REQUIRED" in reason or "certificate required" in reason:
        return ClusterAccessError(
            f"{where}: the broker requires a client certificate ({reason}): give it with"
            f" {flags['tls_cert']} and {flags['tls_key']}",
            kind="tls_failed",
            argument=flags["tls_cert"],
        )
    return ClusterAccessError(
        f"{where}: the TLS handshake failed ({reason}): check {flags['tls_trust_certs']},"
        f" {flags['tls_cert']} and {flags['tls_key']}",
        kind="tls_failed",
        argument=flags["tls_trust_certs"],
    )


# --- anything else (the Pulsar client, a socket) -----------------------------------------------


def failure(
    connection: Settings, error: BaseException, address: str | None = None
) -> ClusterAccessError:
    """``error`` as one line saying what to change, as
    :meth:`~keyshared.connection.ClusterConnection.failure` says."""
    if isinstance(error, ClusterAccessError):
        return error
    flags = connection.flags
    where = safe_url(address or connection.service_url or connection.admin_url or "the cluster")
    kind = type(error).__name__
    said = scrub(connection, str(error)) or kind
    if kind == "AuthenticationError":
        return ClusterAccessError(
            f"{where}: the cluster refused the credentials ({said}): {_GIVE_TOKEN}",
            kind="unauthorized",
            argument=_credentials_flag(connection),
        )
    if kind == "AuthorizationError":
        role = connection.role()
        return ClusterAccessError(
            f"{where}: {_the_role(role)} has no permission for this ({said}): grant it"
            f" {_grant('', role)} or use another token",
            kind="forbidden",
            argument=_credentials_flag(connection),
        )
    if isinstance(error, ssl.SSLError):
        host = urllib.parse.urlsplit(where).hostname or where
        return _tls_failure(connection, error, where, host, flags["service_url"], [])
    if kind in ("ConnectError", "Timeout") or isinstance(error, OSError):
        probed = _probe(connection, where)
        if probed is not None:
            return probed
    if kind == "Timeout" or isinstance(error, TimeoutError):
        return ClusterAccessError(
            f"{where}: no answer within {connection.timeout_s:g} s ({said}): check"
            f" {flags['service_url']}, or give a longer {flags['timeout_s']}",
            kind="timed_out",
            argument=flags["service_url"],
        )
    return ClusterAccessError(
        f"{where}: {said}: check {flags['service_url']}",
        kind="unreachable",
        argument=flags["service_url"],
    )


def _probe(connection: Settings, url: str) -> ClusterAccessError | None:
    """What a TCP connection (and TLS handshake for a TLS URL) to ``url``'s first host
    finds wrong, within ``timeout_s``; None when it goes through."""
    parts = urllib.parse.urlsplit(url)
    tls = parts.scheme in ("pulsar+ssl", "https")
    flags, timeout_s = connection.flags, connection.timeout_s
    flag = flags["admin_url" if parts.scheme.startswith("http") else "service_url"]
    first = parts.netloc.rpartition("@")[2].split(",")[0]
    host, _, port_text = first.rpartition(":")
    if not host or not port_text.isdigit():
        return None
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port_text)), timeout_s) as raw:
            if tls:
                with context(connection, "cluster").wrap_socket(raw, server_hostname=host):
                    pass
    except ConnectionRefusedError:
        return ClusterAccessError(
            f"nothing listens at {host}:{port_text}: check {flag}",
            kind="connection_refused",
            argument=flag,
        )
    except TimeoutError:
        return ClusterAccessError(
            f"{url}: no answer from {host}:{port_text} within {timeout_s:g} s: check"
            f" {flag}, or give a longer {flags['timeout_s']}",
            kind="timed_out",
            argument=flag,
        )
    except ssl.SSLError as e:
        names = (
            certificate_names(connection, host, int(port_text))
            if verify_code(e) in HOSTNAME_MISMATCH
            else []
        )
        return _tls_failure(connection, e, url, host, flag, names)
    except OSError as e:
        return ClusterAccessError(
            scrub(connection, f"{url}: {host}:{port_text} cannot be reached ({e}): check {flag}"),
            kind="unreachable",
            argument=flag,
        )
    return None


__all__ = [
    "AnswerError",
    "HttpStatusError",
    "error_detail",
    "failure",
    "request_failure",
    "scrub",
]
