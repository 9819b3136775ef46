"""How keyshared reaches a Pulsar cluster: its admin REST endpoint and its brokers, with the
cluster's TLS and authentication settings, in one place.

:class:`ClusterConnection` holds the settings: the admin URL (``https://host:8443``), the
service URL (``pulsar+ssl://host:6651``), one way to authenticate (a token, a client
certificate as Pulsar's ``AuthenticationTls``, or OAuth 2.0 client credentials as Pulsar's
``AuthenticationOAuth2``), the certificate authorities to trust, and a timeout. It reads
them from pulsar-admin's own ``client.conf`` (:meth:`ClusterConnection.from_client_conf`)
or from the command line's flags (:func:`add_arguments`, :func:`from_arguments`), and
gives:

- :meth:`ClusterConnection.admin`: one admin REST request, bounded as a whole by the
  timeout, with the credentials and the TLS settings;
- :meth:`ClusterConnection.pulsar_client`: a ``pulsar.Client`` (the optional extra
  ``keyshared[verify]``) with the same settings;
- :meth:`ClusterConnection.describe`: the settings for a report, every secret as ``***``;
- :meth:`ClusterConnection.failure`: what went wrong, as a :class:`ClusterAccessError`
  whose one-line message says what to change (a refused token, an untrusted certificate, a
  certificate for another host name, nothing listening at the address).

A secret (a token, an OAuth 2.0 client secret or access token) is held in a :class:`Secret`
and never shows in a message, a repr, a traceback or :meth:`~ClusterConnection.describe`.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hmac
import http.client
import json
import math
import os
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

from keyshared._checks import check_bool
from keyshared._jsonfile import parse_json
from keyshared.errors import ArgumentTypeError, ClusterAccessError, InvalidArgument
from keyshared.explain.stats import shown

#: Seconds to wait for the admin REST endpoint.
DEFAULT_TIMEOUT_S = 10.0

#: The longest timeout or interval, in seconds: a year. Python's waits overflow well below
#: ``threading.TIMEOUT_MAX`` (a sleep adds the machine's uptime to its deadline).
MAX_SECONDS = 365 * 24 * 3600

#: How a setting is named in messages, by :class:`ClusterConnection` field: the command
#: line's flag (:func:`add_arguments`).
FLAGS: Mapping[str, str] = MappingProxyType(
    {
        "admin_url": "--admin-url",
        "service_url": "--service-url",
        "token": "--token",
        "tls_cert": "--tls-cert",
        "tls_key": "--tls-key",
        "oauth2_issuer_url": "--oauth2-issuer-url",
        "oauth2_credentials": "--oauth2-credentials",
        "oauth2_audience": "--oauth2-audience",
        "oauth2_scope": "--oauth2-scope",
        "tls_trust_certs": "--tls-trust-certs",
        "tls_allow_insecure": "--tls-allow-insecure",
        "tls_hostname_verification": "--tls-no-hostname-verification",
        "timeout_s": "--timeout",
    }
)

# What to do about refused credentials, whichever way they were given.
_GIVE_TOKEN = "give a token with --token/--token-file/--token-env or --client-conf"
# Pulsar's AuthenticationOAuth2 renews a token at 90% of its lifetime (EXPIRY_ADJUSTMENT).
_OAUTH2_RENEW_AT = 0.9
# The most of an HTTP error's body read for its reason.
_ERROR_BODY_LIMIT = 16 * 1024
# Secrets shorter than this are not searched for in messages: they would match ordinary text.
_SHORTEST_SCRUBBED = 4


def check_timeout(name: str, value: object) -> float:
    """A timeout or interval in seconds: a finite number > 0 and at most a year
    (:data:`MAX_SECONDS`); the error names ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(
            f"{name} must be a number of seconds, got {type(value).__name__}", argument=name
        )
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgument(
            f"{name} must be a finite number of seconds > 0, got {value}", argument=name
        )
    if value > MAX_SECONDS:
        raise InvalidArgument(
            f"{name} must be at most {MAX_SECONDS} seconds (a year), got {value}", argument=name
        )
    return float(value)


# --- secrets -------------------------------------------------------------------------------


class Secret:
    """A secret string (a token): :meth:`reveal` gives it; its ``repr`` and ``str`` are
    ``Secret('***')`` and ``***``, and it refuses to be pickled, so that it never reaches a
    log, a message or a file by accident. Two are equal when their values are."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise ArgumentTypeError(
                f"value must be a str, got {type(value).__name__}", argument="value"
            )
        self._value = value

    def reveal(self) -> str:
        """The secret itself, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __format__(self, spec: str) -> str:
        return format("***", spec)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(
            self._value.encode("utf-8", "surrogatepass"),
            other._value.encode("utf-8", "surrogatepass"),
        )

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret is not pickled: it would be written out as plain text")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: object) -> Secret:
        return self


# --- errors of the admin endpoint ------------------------------------------------------------


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


def _error_detail(body: bytes) -> str | None:
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


# --- the settings --------------------------------------------------------------------------


class _State:
    """What a connection learns as it is used: its TLS contexts and openers, built once, and
    an OAuth 2.0 access token until it is due for renewal (monotonic seconds)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.openers: dict[str, urllib.request.OpenerDirector] = {}
        self.contexts: dict[str, ssl.SSLContext] = {}
        self.access_token: Secret | None = None
        self.renew_at = 0.0
        self.secrets: list[str] = []

    def __reduce__(self) -> tuple[type[_State], tuple[()]]:
        # What was learned stays behind: a copy (deepcopy, asdict, pickle) starts afresh.
        return _State, ()


@dataclass(frozen=True)
class ClusterConnection:
    """How to reach one Pulsar cluster. Every field may be None where it is not needed:

    - ``admin_url``: the admin REST endpoint, ``http://host:8080`` or ``https://host:8443``;
    - ``service_url``: the brokers, ``pulsar://host:6650`` or ``pulsar+ssl://host:6651``;
    - ``token``: a token (Pulsar's ``AuthenticationToken``), sent as ``Authorization:
      Bearer``; ``token_from`` says where it was read from (for reports: never the token);
    - ``tls_cert`` and ``tls_key``: a client certificate and its private key (PEM), shown in
      every TLS handshake; alone (no token, no OAuth 2.0) they are the credentials, as
      Pulsar's ``AuthenticationTls`` (the role is the certificate's common name);
    - ``oauth2_issuer_url``, ``oauth2_credentials`` (the JSON file of ``client_id`` and
      ``client_secret``, Pulsar's ``privateKey``), ``oauth2_audience`` and
      ``oauth2_scope``: OAuth 2.0 client credentials (Pulsar's ``AuthenticationOAuth2``);
    - ``tls_trust_certs``: the certificate authorities (PEM) that sign the cluster's
      certificates, instead of the system's;
    - ``tls_allow_insecure``: accept any certificate (no check at all);
    - ``tls_hostname_verification``: check that the certificate is for the host connected
      to (on unless turned off);
    - ``timeout_s``: seconds for each whole request (> 0, at most a year);
    - ``flags``: how each setting is named in errors and in what they say to do, by field
      (:data:`FLAGS`, the command line's, by default; :meth:`from_client_conf` names the
      file's keys).

    A path may be given as a ``str``. Files are checked to exist when the connection is
    made; a token or OAuth 2.0 credentials with a client certificate are allowed (the
    certificate then serves TLS alone), a token with OAuth 2.0 is not."""

    admin_url: str | None = None
    service_url: str | None = None
    token: Secret | None = None
    token_from: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    oauth2_issuer_url: str | None = None
    oauth2_credentials: Path | None = None
    oauth2_audience: str | None = None
    oauth2_scope: str | None = None
    tls_trust_certs: Path | None = None
    tls_allow_insecure: bool = False
    tls_hostname_verification: bool = True
    timeout_s: float = DEFAULT_TIMEOUT_S
    flags: Mapping[str, str] = field(default_factory=lambda: FLAGS, compare=False, repr=False)
    _state: _State = field(default_factory=_State, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        flags = MappingProxyType({**FLAGS, **_checked_flags(self.flags)})
        set_ = object.__setattr__
        set_(self, "flags", flags)
        for name in ("tls_cert", "tls_key", "oauth2_credentials", "tls_trust_certs"):
            set_(self, name, _checked_path(flags[name], getattr(self, name)))
        for name in ("admin_url", "oauth2_issuer_url"):
            _check_url(flags[name], getattr(self, name), ("http", "https"))
        _check_url(flags["service_url"], self.service_url, ("pulsar", "pulsar+ssl"))
        for name in ("token_from", "oauth2_audience", "oauth2_scope"):
            _check_optional_str(flags.get(name, name), getattr(self, name))
        check_bool(flags["tls_allow_insecure"], self.tls_allow_insecure)
        check_bool(flags["tls_hostname_verification"], self.tls_hostname_verification)
        set_(self, "timeout_s", check_timeout(flags["timeout_s"], self.timeout_s))
        if self.token is not None:
            _check_token(flags["token"], self.token)
        if (self.tls_cert is None) != (self.tls_key is None):
            missing, given = (
                ("tls_key", "tls_cert") if self.tls_key is None else ("tls_cert", "tls_key")
            )
            raise InvalidArgument(
                f"{flags[given]} needs {flags[missing]}: a client certificate and its key",
                argument=flags[missing],
            )
        oauth2 = (self.oauth2_issuer_url, self.oauth2_credentials)
        if any(v is not None for v in (*oauth2, self.oauth2_audience, self.oauth2_scope)):
            for name, value in zip(
                ("oauth2_issuer_url", "oauth2_credentials"), oauth2, strict=True
            ):
                if value is None:
                    raise InvalidArgument(f"OAuth 2.0 needs {flags[name]}", argument=flags[name])
            if self.token is not None:
                raise InvalidArgument(
                    f"give one way to authenticate: {flags['token']} or OAuth 2.0"
                    f" ({flags['oauth2_issuer_url']}), not both",
                    argument=flags["token"],
                )
        if self.token is not None:
            self._state.secrets.append(self.token.reveal())

    def __getstate__(self) -> dict[str, Any]:
        # A read-only mapping does not pickle: its contents do (a Secret still refuses).
        return {**self.__dict__, "flags": dict(self.flags)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, flags=MappingProxyType(state["flags"]))

    # --- reading settings -------------------------------------------------------------------

    @classmethod
    def from_client_conf(cls, path: str | os.PathLike[str], **overrides: Any) -> ClusterConnection:
        """The settings of pulsar-admin's ``client.conf`` at ``path`` (Java properties:
        ``webServiceUrl``, ``brokerServiceUrl``, ``authPlugin`` and ``authParams``,
        ``tlsTrustCertsFilePath``, ``tlsAllowInsecureConnection``,
        ``tlsEnableHostnameVerification``, ``tlsCertificateFilePath`` and
        ``tlsKeyFilePath``), with ``overrides`` (fields of this class) over them. Overriding
        any credential (``token``, ``tls_cert``, ``tls_key`` or an ``oauth2_*`` field) sets
        the credentials aside that the file gives. Errors about the file name it and the
        key."""
        values, flags = read_client_conf(path)
        return cls._merged(values, flags, overrides, dict(overrides.pop("flags", FLAGS)))

    @classmethod
    def of(
        cls, url: str | ClusterConnection, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> ClusterConnection:
        """``url`` as a connection: a :class:`ClusterConnection` as it is (its own
        ``timeout_s`` then bounds each request), or an admin URL (``http://host:8080``)
        without TLS or authentication settings, each request bounded by ``timeout_s``
        (an error names it ``timeout``)."""
        if isinstance(url, ClusterConnection):
            return url
        return cls(admin_url=url, timeout_s=check_timeout("timeout", timeout_s))

    @classmethod
    def _merged(
        cls,
        values: dict[str, Any],
        flags: dict[str, str],
        overrides: Mapping[str, Any],
        override_flags: Mapping[str, str],
    ) -> ClusterConnection:
        if any(name in _CREDENTIALS for name in overrides):
            for name in _CREDENTIALS:
                values.pop(name, None)
        names = dict(override_flags)
        names.update((n, flags[n]) for n in values if n not in overrides and n in flags)
        return cls(**{**values, **overrides}, flags=names)

    def to_child(self) -> dict[str, Any]:
        """The settings as JSON-ready values *with the secrets in them*, for a child
        process that makes the same connection (:meth:`from_child`), handed over a pipe:
        never on a command line, in a file or in a log."""
        child = {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if name not in ("token", "flags", "_state")
        }
        for name, value in child.items():
            if isinstance(value, Path):
                child[name] = str(value)
        child["token"] = None if self.token is None else self.token.reveal()
        child["flags"] = dict(self.flags)
        return child

    @classmethod
    def from_child(cls, data: Mapping[str, Any]) -> ClusterConnection:
        """The connection :meth:`to_child` gave the settings of."""
        values = dict(data)
        token = values.pop("token", None)
        return cls(**values, token=None if token is None else Secret(token))

    # --- what it is -------------------------------------------------------------------------

    @property
    def authentication(self) -> str:
        """How the connection authenticates: ``"token"``, ``"oauth2"``, ``"tls"`` (a
        client certificate alone) or ``"none"``."""
        if self.token is not None:
            return "token"
        if self.oauth2_issuer_url is not None:
            return "oauth2"
        return "tls" if self.tls_cert is not None else "none"

    def describe(self) -> dict[str, Any]:
        """The settings as JSON-ready values, for ``--json`` and reports: URLs (without a
        password in them), paths, flags, and ``"***"`` where a token is held; never a
        secret."""
        return {
            "admin_url": None if self.admin_url is None else _safe_url(self.admin_url),
            "service_url": None if self.service_url is None else _safe_url(self.service_url),
            "authentication": self.authentication,
            "token": None if self.token is None else str(self.token),
            "token_from": self.token_from,
            "tls_cert": _shown_path(self.tls_cert),
            "tls_key": _shown_path(self.tls_key),
            "oauth2_issuer_url": self.oauth2_issuer_url,
            "oauth2_credentials": _shown_path(self.oauth2_credentials),
            "oauth2_audience": self.oauth2_audience,
            "oauth2_scope": self.oauth2_scope,
            "tls_trust_certs": _shown_path(self.tls_trust_certs),
            "tls_allow_insecure": self.tls_allow_insecure,
            "tls_hostname_verification": self.tls_hostname_verification,
            "timeout_s": self.timeout_s,
        }

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS settings of a connection to the cluster: its certificate authorities
        (``tls_trust_certs``, else the system's), the client certificate, the host name
        checked unless ``tls_hostname_verification`` is off, and no check at all only with
        ``tls_allow_insecure``. Built once."""
        return self._context("cluster")

    def _context(self, purpose: str) -> ssl.SSLContext:
        with self._state.lock:
            context = self._state.contexts.get(purpose)
            if context is None:
                context = self._new_context(purpose)
                self._state.contexts[purpose] = context
            return context

    def _new_context(self, purpose: str) -> ssl.SSLContext:
        """A new TLS context: ``"cluster"`` as :meth:`ssl_context` says; ``"issuer"`` (an
        OAuth 2.0 issuer, most often outside the cluster) trusts the system's authorities
        and ``tls_trust_certs``, always checks, and shows no client certificate."""
        flags = self.flags
        context = ssl.create_default_context()
        if self.tls_trust_certs is not None:
            if purpose == "cluster":
                # As Pulsar's tlsTrustCertsFilePath: these authorities, not the system's.
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            try:
                context.load_verify_locations(cafile=str(self.tls_trust_certs))
            except (ssl.SSLError, OSError) as e:
                reason = _ssl_reason(e)
                raise InvalidArgument(
                    f"{flags['tls_trust_certs']}: {self.tls_trust_certs} holds no PEM"
                    f" certificate ({reason})",
                    argument=flags["tls_trust_certs"],
                ) from None
        if purpose == "issuer":
            return context
        if self.tls_cert is not None and self.tls_key is not None:
            try:
                context.load_cert_chain(str(self.tls_cert), str(self.tls_key))
            except (ssl.SSLError, OSError) as e:
                reason = _ssl_reason(e)
                raise InvalidArgument(
                    f"{flags['tls_cert']} {self.tls_cert} and {flags['tls_key']} {self.tls_key}"
                    f" are not a PEM certificate and its private key ({reason})",
                    argument=flags["tls_cert"],
                ) from None
        if self.tls_allow_insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif not self.tls_hostname_verification:
            context.check_hostname = False
        return context

    def _opener(self, purpose: str) -> urllib.request.OpenerDirector:
        context = self._context(purpose)
        with self._state.lock:
            opener = self._state.openers.get(purpose)
            if opener is None:
                opener = urllib.request.build_opener(
                    urllib.request.HTTPSHandler(context=context), _Redirects()
                )
                self._state.openers[purpose] = opener
            return opener

    # --- the admin REST endpoint ------------------------------------------------------------

    def admin_address(self, path: str) -> str:
        """The URL of ``path``: a path (``/admin/v2/...``) under ``admin_url``, or a whole
        ``http(s)://`` URL as it is."""
        if path.startswith(("http://", "https://")):
            return path
        if self.admin_url is None:
            flag = self.flags["admin_url"]
            raise InvalidArgument(
                f"no admin URL to send {path} to: give {flag} or --client-conf with webServiceUrl",
                argument=flag,
            )
        return f"{self.admin_url.rstrip('/')}/{path.lstrip('/')}"

    def admin(self, method: str, path: str, body: object = None) -> bytes:
        """The body of the admin REST request ``method`` (``GET``, ``PUT``, ...) of
        ``path`` (see :meth:`admin_address`), with ``body`` (bytes as they are, anything
        else as JSON) when given. It carries the credentials (to ``admin_url``'s host only)
        and the TLS settings, follows the redirects of a cluster's brokers (never from
        https to http), and is bounded as a whole by ``timeout_s`` (connecting, the headers
        and every read of the body). Errors name the address: :class:`HttpStatusError` for
        an HTTP error, :class:`AnswerError` for a body cut short, and
        :class:`~keyshared.errors.ClusterAccessError` for an address that cannot be
        reached, a TLS failure, refused credentials (401) or a missing permission (403)."""
        address = self.admin_address(path)
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(address, data=data, method=method.upper(), headers=headers)
        if self._credentials_go_to(address):
            bearer = self._bearer()
            if bearer is not None:
                request.add_header("Authorization", f"Bearer {bearer.reveal()}")
        return self._send(request, "cluster", self.flags["admin_url"], path)

    def admin_json(self, method: str, path: str, body: object = None) -> Any:
        """The JSON answer of :meth:`admin`; a ValueError naming the address when it is not
        JSON."""
        answer = self.admin(method, path, body)
        return parse_json(answer, _safe_url(self.admin_address(path)))

    def _credentials_go_to(self, address: str) -> bool:
        if self.admin_url is None:
            return True
        return _origin(address) == _origin(self.admin_url)

    def _bearer(self) -> Secret | None:
        if self.token is not None:
            return self.token
        if self.oauth2_issuer_url is not None:
            return self._oauth2_access_token()
        return None

    def _send(
        self, request: urllib.request.Request, purpose: str, url_flag: str, what: str
    ) -> bytes:
        """The body of ``request``'s answer within ``timeout_s``, or the error that says
        why not (``url_flag`` names the setting of its address, ``what`` the request in a
        403's message)."""
        opener = self._opener(purpose) if request.type == "https" else _PLAIN
        address = _safe_url(request.full_url)
        parts = urllib.parse.urlsplit(request.full_url)
        timeout_s = self.timeout_s
        outcome: list[bytes | BaseException] = []
        detail: list[str | None] = []
        names: list[list[str]] = []

        def exchange() -> None:
            try:
                with opener.open(request, timeout=timeout_s) as answer:
                    outcome.append(answer.read())
            except urllib.error.HTTPError as e:
                # Read here, within the deadline: an error's body can hang as a body can.
                try:
                    detail.append(_error_detail(e.read(_ERROR_BODY_LIMIT)))
                except (OSError, http.client.HTTPException):
                    detail.append(None)
                finally:
                    e.close()
                outcome.append(e)
            except BaseException as e:  # handed to the caller's thread
                if _verify_code(e) in _HOSTNAME_MISMATCH:
                    names.append(self._certificate_names(parts.hostname or "", parts.port or 443))
                outcome.append(e)

        # A thread of its own bounds the whole request: urllib's timeout bounds each socket
        # operation alone. A request still running at the deadline is left to its own
        # socket timeout; the thread is a daemon, so it never keeps the process alive.
        worker = threading.Thread(target=exchange, name="keyshared-admin", daemon=True)
        worker.start()
        worker.join(timeout_s)
        result = outcome[0] if outcome else None
        if isinstance(result, bytes):
            return result
        # Raised here, outside any handler, so that no chained exception carries a secret.
        raise self._request_failure(
            result, address, purpose, url_flag, what, detail[0] if detail else None, names
        )

    def _request_failure(
        self,
        result: BaseException | None,
        address: str,
        purpose: str,
        url_flag: str,
        what: str,
        detail: str | None,
        names: list[list[str]],
    ) -> BaseException:
        scrub = self._scrub
        late = ClusterAccessError(
            f"{address}: no complete answer within {self.timeout_s:g} s",
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
            said = None if detail is None else scrub(detail)
            if purpose == "issuer" and result.code in (400, 401):
                flags = self.flags
                pulsar_says = "" if said is None else f" ({shown(said, 200)})"
                return ClusterAccessError(
                    f"{address}: HTTP {result.code}: the issuer refused the client"
                    f" credentials{pulsar_says}: check {flags['oauth2_credentials']},"
                    f" {flags['oauth2_audience']} and {flags['oauth2_scope']}",
                    kind="oauth2_refused",
                    argument=flags["oauth2_credentials"],
                    status=result.code,
                )
            if result.code in (401, 403):
                return self._refusal(address, result.code, what, said)
            return HttpStatusError(address, result.code, str(result.reason), said)
        if isinstance(reason, ssl.SSLError):
            host = urllib.parse.urlsplit(address).hostname or ""
            return self._tls_failure(reason, address, host, url_flag, names[0] if names else [])
        if isinstance(reason, ConnectionRefusedError):
            return ClusterAccessError(
                scrub(f"{address}: {reason}"), kind="connection_refused", argument=url_flag
            )
        if isinstance(result, urllib.error.URLError):
            return ClusterAccessError(
                scrub(f"{address}: {result.reason}"), kind="unreachable", argument=url_flag
            )
        if isinstance(result, http.client.IncompleteRead):
            got = len(result.partial)
            of = "" if result.expected is None else f" of {got + result.expected}"
            return AnswerError(
                f"{address}: the connection closed after {got}{of} bytes of the answer"
            )
        if isinstance(result, OSError | http.client.HTTPException):
            return OSError(scrub(f"{address}: {result}"))
        if scrub(str(result)) != str(result):
            return OSError(scrub(f"{address}: {type(result).__name__}: {result}"))
        return result

    def _refusal(
        self, address: str, status: int, what: str, said: str | None
    ) -> ClusterAccessError:
        """The one line of a 401 or 403 (``status``) to the request ``what``, whose answer
        gave the reason ``said``."""
        code = status
        pulsar_says = "" if said is None else f" ({shown(said, 200)})"
        # Pulsar answers 401 to a role it knows but does not allow, with a reason ("Unauthorized
        # to validateTopicOperation ..."); refused credentials come with none of its own.
        if code == 401 and said is not None and self.authentication != "none":
            code = 403 if _PERMISSION.search(said) else code
        if code == 401:
            if self.authentication == "none":
                return ClusterAccessError(
                    f"{address}: HTTP 401: the cluster refused the credentials{pulsar_says}:"
                    f" none were given; {_GIVE_TOKEN}",
                    kind="unauthorized",
                    argument=self.flags["token"],
                    status=401,
                )
            return ClusterAccessError(
                f"{address}: HTTP 401: the cluster refused the credentials"
                f" ({self._credentials_said()}){pulsar_says}: give ones it accepts;"
                f" {_GIVE_TOKEN}",
                kind="unauthorized",
                argument=self._credentials_flag(),
                status=401,
            )
        role = self.role()
        the_role = "the role" if role is None else f"the role {role!r}"
        return ClusterAccessError(
            f"{address}: HTTP {status}: {the_role} has no permission for {_resource(what)}"
            f"{pulsar_says}: grant it {_grant(what, role)} or use another token",
            kind="forbidden",
            argument=self._credentials_flag(),
            status=status,
        )

    def _credentials_said(self) -> str:
        if self.authentication == "token":
            return f"the token of {self.token_from or self.flags['token']}"
        if self.authentication == "oauth2":
            return f"the access token of {self.oauth2_issuer_url}"
        return f"the client certificate {self.tls_cert}"

    def _credentials_flag(self) -> str:
        return self.flags[
            {"oauth2": "oauth2_credentials", "tls": "tls_cert"}.get(self.authentication, "token")
        ]

    def role(self) -> str | None:
        """The role the token claims (its ``sub``, read without checking the signature:
        for messages), or None when there is no token or it is not a JWT."""
        token = self.token or self._state.access_token
        if token is None:
            return None
        parts = token.reveal().split(".")
        if len(parts) != 3:
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        except (ValueError, binascii.Error):
            return None
        sub = claims.get("sub") if isinstance(claims, dict) else None
        return sub if isinstance(sub, str) else None

    def _tls_failure(
        self, error: ssl.SSLError, where: str, host: str, url_flag: str, names: list[str]
    ) -> ClusterAccessError:
        """The one line of a TLS handshake with ``host`` (at ``where``, given by
        ``url_flag``) that failed; ``names``: what the certificate is for, when known."""
        flags = self.flags
        code = _verify_code(error)
        if code in _HOSTNAME_MISMATCH:
            names_said = " and ".join(names) if names else "another host name"
            return ClusterAccessError(
                f"{where}: the certificate is for {names_said}, not {host}: connect by that"
                f" name, or give {flags['tls_hostname_verification']}",
                kind="hostname_mismatch",
                argument=flags["tls_hostname_verification"],
            )
        if isinstance(error, ssl.SSLCertVerificationError):
            said = error.verify_message or _ssl_reason(error)
            if code in _UNTRUSTED:
                by = (
                    "a trusted CA"
                    if self.tls_trust_certs is None
                    else f"a CA of {flags['tls_trust_certs']} {self.tls_trust_certs}"
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
        reason = _ssl_reason(error)
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

    def _certificate_names(self, host: str, port: int) -> list[str]:
        """The host names and addresses the server at ``host``:``port`` shows a
        certificate for, read by a second handshake that checks the certificate but not
        the name; empty when that fails."""
        lax = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        lax.check_hostname = False
        try:
            if self.tls_trust_certs is not None:
                lax.load_verify_locations(cafile=str(self.tls_trust_certs))
            else:
                lax.load_default_certs()
            with (
                socket.create_connection((host, port), self.timeout_s) as raw,
                lax.wrap_socket(raw) as tls,
            ):
                cert: dict[str, Any] = dict(tls.getpeercert() or {})
        except (OSError, ValueError):
            return []
        alt = [str(v) for k, v in cert.get("subjectAltName", ()) if k in ("DNS", "IP Address")]
        if alt:
            return alt
        return [str(v) for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]

    # --- OAuth 2.0 ---------------------------------------------------------------------------

    def _oauth2_access_token(self) -> Secret:
        """An access token from the issuer by the client-credentials grant (RFC 6749 4.4,
        as Pulsar's ClientCredentialsFlow asks it), kept until 90% of its lifetime."""
        state = self._state
        with state.lock:
            if state.access_token is not None and time.monotonic() < state.renew_at:
                return state.access_token
        flags = self.flags
        issuer = str(self.oauth2_issuer_url)
        well_known = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
        metadata = self._issuer_json(
            urllib.request.Request(well_known, headers={"Accept": "application/json"}),
            flags["oauth2_issuer_url"],
        )
        endpoint = metadata.get("token_endpoint") if isinstance(metadata, dict) else None
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            raise ClusterAccessError(
                f"{well_known}: no token_endpoint: check {flags['oauth2_issuer_url']}",
                kind="unreachable",
                argument=flags["oauth2_issuer_url"],
            )
        client_id, client_secret = self._client_credentials()
        form = {
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": client_secret.reveal(),
        }
        if self.oauth2_audience:
            form["audience"] = self.oauth2_audience
        if self.oauth2_scope:
            form["scope"] = self.oauth2_scope
        request = urllib.request.Request(
            endpoint,
            data=urllib.parse.urlencode(form).encode("ascii"),
            method="POST",
            headers={
                "Accept": "application/json",
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        answer = self._issuer_json(request, flags["oauth2_issuer_url"])
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise ClusterAccessError(
                f"{_safe_url(endpoint)}: the issuer's answer holds no access_token",
                kind="oauth2_refused",
                argument=flags["oauth2_issuer_url"],
            )
        lifetime = answer.get("expires_in")
        seconds = float(lifetime) if isinstance(lifetime, int | float) and lifetime > 0 else 0.0
        access_token = Secret(token)
        with state.lock:
            state.secrets.append(token)
            state.access_token = access_token
            state.renew_at = time.monotonic() + seconds * _OAUTH2_RENEW_AT
        return access_token

    def _issuer_json(self, request: urllib.request.Request, url_flag: str) -> Any:
        """The JSON answer of an OAuth 2.0 issuer; its refusal (HTTP 400 or 401) is a
        ClusterAccessError of kind ``oauth2_refused`` in the words of its ``error`` and
        ``error_description``."""
        body = self._send(request, "issuer", url_flag, request.full_url)
        return parse_json(body, _safe_url(request.full_url))

    def _client_credentials(self) -> tuple[str, Secret]:
        """``client_id`` and ``client_secret`` of the ``oauth2_credentials`` file (Pulsar's
        KeyFile JSON)."""
        flag = self.flags["oauth2_credentials"]
        path = self.oauth2_credentials
        try:
            data = json.loads(Path(str(path)).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            # Neither the reason nor the text: a JSON error quotes the file, secret and all.
            raise InvalidArgument(
                f"{flag}: {path} cannot be read as JSON with client_id and client_secret",
                argument=flag,
            ) from None
        client_id = data.get("client_id") if isinstance(data, dict) else None
        secret = data.get("client_secret") if isinstance(data, dict) else None
        if not isinstance(client_id, str) or not isinstance(secret, str) or not secret:
            raise InvalidArgument(
                f"{flag}: {path} needs client_id and client_secret (strings)", argument=flag
            )
        with self._state.lock:
            self._state.secrets.append(secret)
        return client_id, Secret(secret)

    # --- the Pulsar client -------------------------------------------------------------------

    def pulsar_client(self, **kwargs: Any) -> Any:
        """A ``pulsar.Client`` of ``service_url`` with the same credentials and TLS
        settings (``tls_trust_certs_file_path``, ``tls_allow_insecure_connection``,
        ``tls_validate_hostname``), the connection timeout ``timeout_s`` and operations
        bounded by it; ``kwargs`` go to ``pulsar.Client`` over these. It needs the Pulsar
        client: ``pip install 'keyshared[verify]'``. The client connects when first used:
        :meth:`failure` turns what it then raises into one line."""
        pulsar = _pulsar_module()
        flags = self.flags
        if self.service_url is None:
            raise InvalidArgument(
                f"no service URL for the Pulsar client: give {flags['service_url']} or"
                " --client-conf with brokerServiceUrl",
                argument=flags["service_url"],
            )
        options: dict[str, Any] = {
            "connection_timeout_ms": int(self.timeout_s * 1000),
            "operation_timeout_seconds": max(1, math.ceil(self.timeout_s)),
            "tls_allow_insecure_connection": self.tls_allow_insecure,
            "tls_validate_hostname": self.tls_hostname_verification and not self.tls_allow_insecure,
        }
        if self.tls_trust_certs is not None:
            options["tls_trust_certs_file_path"] = str(self.tls_trust_certs)
        auth = self.authentication
        if auth == "token" and self.token is not None:
            options["authentication"] = pulsar.AuthenticationToken(self.token.reveal())
        elif auth == "oauth2":
            params = {
                "issuer_url": self.oauth2_issuer_url,
                "private_key": str(self.oauth2_credentials),
            }
            if self.oauth2_audience:
                params["audience"] = self.oauth2_audience
            if self.oauth2_scope:
                params["scope"] = self.oauth2_scope
            options["authentication"] = pulsar.AuthenticationOauth2(json.dumps(params))
        elif auth == "tls":
            options["authentication"] = pulsar.AuthenticationTLS(
                str(self.tls_cert), str(self.tls_key)
            )
        if auth != "tls" and self.tls_cert is not None:
            options["tls_certificate_file_path"] = str(self.tls_cert)
            options["tls_private_key_file_path"] = str(self.tls_key)
        options.update(kwargs)
        return pulsar.Client(self.service_url, **options)

    def failure(self, error: BaseException, address: str | None = None) -> ClusterAccessError:
        """``error`` (raised by :meth:`admin`, by the Pulsar client of :meth:`pulsar_client`
        or by a socket) as one line saying what to change. The Pulsar client names no cause
        of a failed connection: for ``ConnectError`` and ``Timeout`` the service URL's
        address is tried again here (a TCP connection and, for ``pulsar+ssl://``, a TLS
        handshake, within ``timeout_s``) to tell nothing listening from an untrusted
        certificate or the wrong host name. ``address`` is what the line starts with (the
        service URL by default)."""
        if isinstance(error, ClusterAccessError):
            return error
        flags = self.flags
        where = _safe_url(address or self.service_url or self.admin_url or "the cluster")
        kind = type(error).__name__
        said = self._scrub(str(error)) or kind
        if kind == "AuthenticationError":
            return ClusterAccessError(
                f"{where}: the cluster refused the credentials ({said}): {_GIVE_TOKEN}",
                kind="unauthorized",
                argument=self._credentials_flag(),
            )
        if kind == "AuthorizationError":
            role = self.role()
            the_role = "the role" if role is None else f"the role {role!r}"
            return ClusterAccessError(
                f"{where}: {the_role} has no permission for this ({said}): grant it"
                f" {_grant('', role)} or use another token",
                kind="forbidden",
                argument=self._credentials_flag(),
            )
        if isinstance(error, ssl.SSLError):
            host = urllib.parse.urlsplit(where).hostname or where
            return self._tls_failure(error, where, host, flags["service_url"], [])
        if kind in ("ConnectError", "Timeout") or isinstance(error, OSError):
            probed = self._probe(where)
            if probed is not None:
                return probed
        if kind == "Timeout" or isinstance(error, TimeoutError):
            return ClusterAccessError(
                f"{where}: no answer within {self.timeout_s:g} s ({said}): check"
                f" {flags['service_url']}, or give a longer {flags['timeout_s']}",
                kind="timed_out",
                argument=flags["service_url"],
            )
        return ClusterAccessError(
            f"{where}: {said}: check {flags['service_url']}",
            kind="unreachable",
            argument=flags["service_url"],
        )

    def _probe(self, url: str) -> ClusterAccessError | None:
        """What a TCP connection (and TLS handshake for a TLS URL) to ``url``'s first host
        finds wrong, within ``timeout_s``; None when it goes through."""
        parts = urllib.parse.urlsplit(url)
        tls = parts.scheme in ("pulsar+ssl", "https")
        flag = self.flags["admin_url" if parts.scheme.startswith("http") else "service_url"]
        first = parts.netloc.rpartition("@")[2].split(",")[0]
        host, _, port_text = first.rpartition(":")
        if not host or not port_text.isdigit():
            return None
        host = host.strip("[]")
        try:
            with socket.create_connection((host, int(port_text)), self.timeout_s) as raw:
                if tls:
                    with self.ssl_context().wrap_socket(raw, server_hostname=host):
                        pass
        except ConnectionRefusedError:
            return ClusterAccessError(
                f"nothing listens at {host}:{port_text}: check {flag}",
                kind="connection_refused",
                argument=flag,
            )
        except TimeoutError:
            return ClusterAccessError(
                f"{url}: no answer from {host}:{port_text} within {self.timeout_s:g} s: check"
                f" {flag}, or give a longer {self.flags['timeout_s']}",
                kind="timed_out",
                argument=flag,
            )
        except ssl.SSLError as e:
            names = (
                self._certificate_names(host, int(port_text))
                if _verify_code(e) in _HOSTNAME_MISMATCH
                else []
            )
            return self._tls_failure(e, url, host, flag, names)
        except OSError as e:
            return ClusterAccessError(
                self._scrub(f"{url}: {host}:{port_text} cannot be reached ({e}): check {flag}"),
                kind="unreachable",
                argument=flag,
            )
        return None

    def _scrub(self, text: str) -> str:
        """``text`` with every secret the connection holds replaced by ``***``."""
        with self._state.lock:
            secrets = sorted(set(self._state.secrets), key=len, reverse=True)
        for secret in secrets:
            if len(secret) >= _SHORTEST_SCRUBBED:
                text = text.replace(secret, "***")
        return text


# --- helpers of the settings ---------------------------------------------------------------

_CREDENTIALS = (
    "token",
    "token_from",
    "tls_cert",
    "tls_key",
    "oauth2_issuer_url",
    "oauth2_credentials",
    "oauth2_audience",
    "oauth2_scope",
)
# What Pulsar's reason says when a role it authenticated lacks a permission.
_PERMISSION = re.compile(r"unauthorized to|not authorized|permission", re.IGNORECASE)
# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH.
_HOSTNAME_MISMATCH = frozenset({62, 64})
# OpenSSL's verify codes of a chain that ends at no trusted authority: a self-signed
# certificate (18, 19), an issuer not found (2, 20) or a leaf nobody vouches for (21).
_UNTRUSTED = frozenset({2, 18, 19, 20, 21})


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows a cluster's redirects (a broker sends an admin request on to the topic's
    owner with 307) for every method, keeping the method, the body and the credentials,
    as pulsar-admin does; never from https to http."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        if req.type == "https" and not newurl.startswith("https://"):
            return None
        if code in (307, 308):
            return urllib.request.Request(
                newurl,
                data=req.data,
                # Its own headers only: urllib adds Host and the rest for the new address.
                headers=dict(req.headers),
                origin_req_host=req.origin_req_host,
                unverifiable=True,
                method=req.get_method(),
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


# Plain http: no TLS settings to carry, but the same redirects.
_PLAIN = urllib.request.build_opener(_Redirects())


def _verify_code(error: BaseException) -> int | None:
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    code = getattr(reason, "verify_code", None)
    return code if isinstance(code, int) else None


def _ssl_reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    return str(reason) if reason else str(error)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port or default


def _safe_url(url: str) -> str:
    """``url`` without the password a user may have put in it."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _shown_path(path: Path | None) -> str | None:
    return None if path is None else str(path)


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


def _checked_flags(flags: object) -> Mapping[str, str]:
    if not isinstance(flags, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in flags.items()
    ):
        raise ArgumentTypeError("flags must map field names to str", argument="flags")
    return flags


def _checked_path(name: str, value: object) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike):
        raise ArgumentTypeError(f"{name} must be a path, got {type(value).__name__}", argument=name)
    path = Path(value)
    if not path.is_file():
        raise InvalidArgument(f"{name}: no such file: {path}", kind="missing_file", argument=name)
    return path


def _check_url(name: str, value: object, schemes: tuple[str, ...]) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a URL, got {type(value).__name__}", argument=name)
    scheme, _, rest = value.partition("://")
    if scheme.lower() not in schemes or not rest.strip("/"):
        raise InvalidArgument(
            f"{name} must be a {' or '.join(s + '://' for s in schemes)} URL,"
            f" got {shown(_safe_url(value), 100)}",
            argument=name,
        )


def _check_optional_str(name: str, value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(value).__name__}", argument=name)


def _check_token(name: str, token: object) -> None:
    if not isinstance(token, Secret):
        raise ArgumentTypeError(
            f"{name} must be a Secret, got {type(token).__name__}", argument=name
        )
    value = token.reveal()
    if not value:
        raise InvalidArgument(f"{name} is empty", argument=name)
    # Never the token itself: only what is wrong with it.
    if not value.isascii() or not value.isprintable() or any(c.isspace() for c in value):
        raise InvalidArgument(
            f"{name} is not a token: it holds a space, a line break or a character outside"
            " printable ASCII",
            argument=name,
        )


def _pulsar_module() -> Any:
    try:
        import pulsar
    except ImportError:
        raise InvalidArgument(
            "the Pulsar client is not installed: pip install 'keyshared[verify]'",
            argument=None,
        ) from None
    return pulsar


# --- tokens ----------------------------------------------------------------------------------


def token_from_file(path: str | os.PathLike[str], name: str = "--token-file") -> Secret:
    """The token in the file ``path`` (or a ``file:`` URL, as Pulsar's ``file:///path``),
    without the spaces and line breaks around it; errors name ``name`` and the path, never
    the file's text."""
    text = str(path)
    file = _file_url_path(text) if text.startswith("file:") else Path(text)
    try:
        token = file.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise InvalidArgument(
            f"{name}: no such file: {file}", kind="missing_file", argument=name
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidArgument(
            f"{name}: {file} cannot be read ({type(e).__name__})", argument=name
        ) from None
    if not token:
        raise InvalidArgument(f"{name}: {file} is empty", argument=name)
    return Secret(token)


def token_from_env(variable: str, name: str = "--token-env") -> Secret:
    """The token in the environment variable ``variable``; errors name ``name`` and the
    variable, never its value."""
    value = os.environ.get(variable, "").strip()
    if not value:
        raise InvalidArgument(
            f"{name}: the environment variable {variable} is not set or empty", argument=name
        )
    return Secret(value)


def _file_url_path(url: str) -> Path:
    """The path of a ``file:`` URL (``file:///p``, ``file:/p``, ``file://localhost/p``)."""
    parts = urllib.parse.urlsplit(url)
    return Path(urllib.request.url2pathname(parts.path))


# --- client.conf -----------------------------------------------------------------------------

# authPlugin's names for each way to authenticate: Pulsar's Java classes, and the C++
# client's AuthFactory short names (compared without letter case, as it does).
_TOKEN_PLUGINS = frozenset({"org.apache.pulsar.client.impl.auth.authenticationtoken", "token"})
_TLS_PLUGINS = frozenset({"org.apache.pulsar.client.impl.auth.authenticationtls", "tls"})
_OAUTH2_PLUGINS = frozenset(
    {"org.apache.pulsar.client.impl.auth.oauth2.authenticationoauth2", "oauth2token"}
)


def read_client_conf(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The :class:`ClusterConnection` fields pulsar-admin's ``client.conf`` at ``path``
    gives, and how each is named there (``tlsTrustCertsFilePath in /etc/client.conf``).
    Empty values count as not given; keys keyshared has no use for are left alone."""
    conf = Path(path)
    try:
        raw = conf.read_bytes()
    except FileNotFoundError:
        raise InvalidArgument(
            f"--client-conf: no such file: {conf}", kind="missing_file", argument="--client-conf"
        ) from None
    except OSError as e:
        raise InvalidArgument(
            f"--client-conf: {conf} cannot be read ({e.strerror})", argument="--client-conf"
        ) from None
    props = read_properties(raw, str(conf))

    def named(key: str) -> str:
        return f"{key} in {conf}"

    def value(key: str) -> str | None:
        found = props.get(key, "").strip()
        return found or None

    values: dict[str, Any] = {}
    flags: dict[str, str] = {}

    def put(name: str, key: str, given: object) -> None:
        if given is not None:
            values[name] = given
            flags[name] = named(key)

    put("admin_url", "webServiceUrl", value("webServiceUrl"))
    put("service_url", "brokerServiceUrl", value("brokerServiceUrl"))
    put("tls_trust_certs", "tlsTrustCertsFilePath", value("tlsTrustCertsFilePath"))
    for name, key in (
        ("tls_allow_insecure", "tlsAllowInsecureConnection"),
        ("tls_hostname_verification", "tlsEnableHostnameVerification"),
    ):
        text = value(key)
        if text is not None:
            if text.lower() not in ("true", "false"):
                raise InvalidArgument(
                    f"{named(key)} must be true or false, got {shown(text)}", argument=named(key)
                )
            put(name, key, text.lower() == "true")
    put("tls_cert", "tlsCertificateFilePath", value("tlsCertificateFilePath"))
    put("tls_key", "tlsKeyFilePath", value("tlsKeyFilePath"))
    plugin = value("authPlugin")
    params = props.get("authParams", "").strip()
    if plugin is not None:
        auth, auth_flags = _auth_settings(plugin, params, named("authPlugin"), named("authParams"))
        values.update(auth)
        flags.update(auth_flags)
    return values, flags


def _auth_settings(
    plugin: str, params: str, plugin_name: str, params_name: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The fields of ``authPlugin`` and its ``authParams``, as Pulsar's Java client reads
    them; errors name the key, never a token."""
    kind = plugin.lower()
    if kind in _TOKEN_PLUGINS:
        return _token_settings(params, params_name)
    if kind in _TLS_PLUGINS:
        found = _json_params(params) or _pulsar1_params(params)
        cert, key = found.get("tlsCertFile"), found.get("tlsKeyFile")
        if not cert or not key:
            raise InvalidArgument(
                f"{params_name} must give tlsCertFile and tlsKeyFile for {plugin}",
                argument=params_name,
            )
        return {"tls_cert": cert, "tls_key": key}, {
            "tls_cert": f"tlsCertFile of {params_name}",
            "tls_key": f"tlsKeyFile of {params_name}",
        }
    if kind in _OAUTH2_PLUGINS:
        found = _json_params(params)
        issuer, key_file = found.get("issuerUrl"), found.get("privateKey")
        if not issuer or not key_file:
            raise InvalidArgument(
                f"{params_name} must be JSON with issuerUrl and privateKey for {plugin}",
                argument=params_name,
            )
        if key_file.startswith("data:"):
            raise InvalidArgument(
                f"privateKey of {params_name}: data: URLs are not read: put the credentials"
                " in a file and give its path",
                argument=params_name,
            )
        credentials = _file_url_path(key_file) if key_file.startswith("file:") else Path(key_file)
        values: dict[str, Any] = {"oauth2_issuer_url": issuer, "oauth2_credentials": credentials}
        names = {
            "oauth2_issuer_url": f"issuerUrl of {params_name}",
            "oauth2_credentials": f"privateKey of {params_name}",
        }
        for name, key in (("oauth2_audience", "audience"), ("oauth2_scope", "scope")):
            if found.get(key):
                values[name] = found[key]
                names[name] = f"{key} of {params_name}"
        return values, names
    raise InvalidArgument(
        f"{plugin_name}: {shown(plugin, 100)} is not a plugin keyshared reads: use"
        " AuthenticationToken, AuthenticationTls or AuthenticationOAuth2 (or give --token,"
        " --tls-cert/--tls-key or --oauth2-*)",
        argument=plugin_name,
    )


def _token_settings(params: str, name: str) -> tuple[dict[str, Any], dict[str, str]]:
    """AuthenticationToken's ``authParams``: ``token:xxx``, ``file:///path``, JSON
    ``{"token": "xxx"}``, or the token itself."""
    if params.startswith("file:"):
        path = _file_url_path(params)
        return {"token": token_from_file(params, name), "token_from": f"{name} ({path})"}, {
            "token": name
        }
    token = params.removeprefix("token:") if params.startswith("token:") else None
    if token is None:
        found = _json_params(params)
        token = found.get("token") if found else params
    if not token:
        raise InvalidArgument(f"{name} gives no token", argument=name)
    return {"token": Secret(token.strip()), "token_from": name}, {"token": name}


def _json_params(params: str) -> dict[str, str]:
    """``params`` read as a JSON object of strings (Pulsar's configureFromJsonString), or
    empty when they are not one."""
    if not params.startswith("{"):
        return {}
    try:
        data = json.loads(params)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if v is not None}


def _pulsar1_params(params: str) -> dict[str, str]:
    """``key:value,key:value`` (Pulsar's configureFromPulsar1AuthParamString: each pair
    split at its first colon, so that a value may hold one)."""
    found = {}
    for pair in params.split(","):
        key, colon, value = pair.partition(":")
        if colon and key:
            found[key] = value
    return found


# --- Java properties -------------------------------------------------------------------------

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(data: bytes | str, name: str = "properties") -> dict[str, str]:
    """A Java properties file (``java.util.Properties.load``) as a dict: ``key=value``,
    ``key: value`` and ``key value``; ``#`` and ``!`` comment lines; a line ending in an
    odd number of backslashes continued on the next; ``\\t``, ``\\n``, ``\\uXXXX`` and the
    other escapes. Bytes are UTF-8 (ISO-8859-1, Java's own encoding, where they are not).
    A later key wins. Errors name ``name`` and the line."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
    else:
        text = data
    found: dict[str, str] = {}
    for number, line in _logical_lines(re.split(r"\r\n|\r|\n", text)):
        key, value = _split_property(line)
        found[_unescape(key, name, number)] = _unescape(value, name, number)
    return found


def _logical_lines(lines: list[str]) -> Iterator[tuple[int, str]]:
    """Each logical line (continuations joined) and the number of its first line."""
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i == len(lines):
                break
            line += lines[i].lstrip(_WHITESPACE)
            i += 1
        yield number, line


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    """The raw key and value of a logical line: the key ends at the first unescaped ``=``,
    ``:`` or whitespace; whitespace, one ``=`` or ``:`` and whitespace follow it."""
    end = 0
    while end < len(line):
        char = line[end]
        if char == "\\":
            end += 2
            continue
        if char in "=:" or char in _WHITESPACE:
            break
        end += 1
    end = min(end, len(line))
    rest = line[end:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":") and rest:
        rest = rest[1:].lstrip(_WHITESPACE)
    return line[:end], rest


def _unescape(text: str, name: str, number: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        i += 1
        if char != "\\":
            out.append(char)
            continue
        if i == len(text):
            break
        char = text[i]
        i += 1
        if char == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise InvalidArgument(
                    f"{name}, line {number}: malformed \\uxxxx escape", argument=name
                )
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(char, char))
    return "".join(out)


# --- the command line --------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a cluster's TLS and authentication settings, in a group of their own:
    ``--client-conf``, ``--token``/``--token-file``/``--token-env``, ``--tls-trust-certs``,
    ``--tls-cert`` and ``--tls-key``, ``--tls-allow-insecure``,
    ``--tls-no-hostname-verification`` and ``--oauth2-*``. The URL flags are the
    command's own (``--admin-url``, ``--service-url``; ``keyshared explain --url``): it
    passes their values to :func:`from_arguments`."""
    group = parser.add_argument_group(
        "cluster connection (flags override --client-conf; see docs/guides/operator.md)"
    )
    group.add_argument(
        "--client-conf",
        metavar="FILE",
        help="pulsar-admin's client.conf: URLs, authPlugin/authParams and TLS settings",
    )
    token = group.add_mutually_exclusive_group()
    token.add_argument(
        "--token", metavar="TOKEN", help="a token (visible to ps: prefer --token-file)"
    )
    token.add_argument(
        "--token-file", metavar="FILE", help="a file holding the token (or file:///path)"
    )
    token.add_argument("--token-env", metavar="VAR", help="an environment variable holding it")
    group.add_argument(
        "--tls-trust-certs", metavar="FILE", help="the CA certificates (PEM) to trust"
    )
    group.add_argument("--tls-cert", metavar="FILE", help="a client certificate (PEM): mutual TLS")
    group.add_argument("--tls-key", metavar="FILE", help="the client certificate's key (PEM)")
    group.add_argument(
        "--tls-allow-insecure",
        action="store_true",
        default=None,
        help="accept any server certificate (no check at all)",
    )
    group.add_argument(
        "--tls-no-hostname-verification",
        action="store_true",
        default=None,
        help="accept a certificate for another host name",
    )
    group.add_argument("--oauth2-issuer-url", metavar="URL", help="the OAuth 2.0 issuer")
    group.add_argument(
        "--oauth2-credentials",
        metavar="FILE",
        help="the JSON file of client_id and client_secret (Pulsar's privateKey)",
    )
    group.add_argument("--oauth2-audience", metavar="A", help="the OAuth 2.0 audience")
    group.add_argument("--oauth2-scope", metavar="S", help="the OAuth 2.0 scope")


def from_arguments(
    args: argparse.Namespace,
    *,
    admin_url: str | None = None,
    service_url: str | None = None,
    admin_url_flag: str = "--admin-url",
    service_url_flag: str = "--service-url",
) -> ClusterConnection:
    """The connection the flags of :func:`add_arguments` describe, with the command's own
    URL flags' values ``admin_url`` and ``service_url`` (named ``admin_url_flag`` and
    ``service_url_flag`` in errors) and ``args.timeout`` where the command has one:
    ``--client-conf``'s settings with every flag given over them. A credential flag (a
    token, the client certificate, OAuth 2.0) sets aside the file's
    ``authPlugin``/``authParams``. Errors name the flag (or the file's key) and the
    path."""
    flags = {**FLAGS, "admin_url": admin_url_flag, "service_url": service_url_flag}
    given: dict[str, Any] = {}
    if admin_url is not None:
        given["admin_url"] = admin_url
    if service_url is not None:
        given["service_url"] = service_url
    if args.token is not None:
        given["token"], given["token_from"] = Secret(args.token), "--token"
    elif args.token_file is not None:
        given["token"] = token_from_file(args.token_file)
        given["token_from"] = f"--token-file ({args.token_file})"
    elif args.token_env is not None:
        given["token"] = token_from_env(args.token_env)
        given["token_from"] = f"--token-env ({args.token_env})"
    for name in (
        "tls_trust_certs",
        "tls_cert",
        "tls_key",
        "oauth2_issuer_url",
        "oauth2_credentials",
        "oauth2_audience",
        "oauth2_scope",
    ):
        value = getattr(args, name)
        if value is not None:
            given[name] = value
    if args.tls_allow_insecure:
        given["tls_allow_insecure"] = True
    if args.tls_no_hostname_verification:
        given["tls_hostname_verification"] = False
    timeout = getattr(args, "timeout", None)
    if timeout is not None:
        given["timeout_s"] = timeout
    if args.client_conf is None:
        return ClusterConnection(**given, flags=flags)
    values, names = read_client_conf(args.client_conf)
    return ClusterConnection._merged(values, names, given, flags)


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "FLAGS",
    "MAX_SECONDS",
    "AnswerError",
    "ClusterConnection",
    "HttpStatusError",
    "Secret",
    "add_arguments",
    "check_timeout",
    "from_arguments",
    "read_client_conf",
    "read_properties",
    "token_from_env",
    "token_from_file",
]
