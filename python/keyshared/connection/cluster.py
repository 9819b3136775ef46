"""The settings of one cluster's connection (:class:`ClusterConnection`): checked when it is
made, described for reports, handed to a child process, and used for the admin REST endpoint
and the Pulsar client."""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import ssl
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import keyshared.connection.failures as failures
import keyshared.connection.oauth2 as oauth2
import keyshared.connection.tls as tls
from keyshared._checks import check_bool
from keyshared._jsonfile import parse_json
from keyshared.connection.client_conf import read_client_conf
from keyshared.connection.rest import same_origin, send
from keyshared.connection.secret import Secret, safe_url
from keyshared.connection.settings import State
from keyshared.connection.timeout import DEFAULT_TIMEOUT_S, check_timeout
from keyshared.errors import ArgumentTypeError, ClusterAccessError, InvalidArgument
from keyshared.explain.stats import shown

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

# The fields that say how to authenticate: overriding one sets aside all that a file gives.
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
    _state: State = field(default_factory=State, init=False, repr=False, compare=False)

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
        names = dict(overrides.pop("flags", FLAGS))
        if any(name in _CREDENTIALS for name in overrides):
            for name in _CREDENTIALS:
                values.pop(name, None)
        names.update((n, flags[n]) for n in values if n not in overrides and n in flags)
        return cls(**{**values, **overrides}, flags=names)

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
            "admin_url": None if self.admin_url is None else safe_url(self.admin_url),
            "service_url": None if self.service_url is None else safe_url(self.service_url),
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
        return tls.context(self, "cluster")

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
        if self.admin_url is None or same_origin(address, self.admin_url):
            bearer = self._bearer()
            if bearer is not None:
                request.add_header("Authorization", f"Bearer {bearer.reveal()}")
        return send(self, request, "cluster", self.flags["admin_url"], path)

    def admin_json(self, method: str, path: str, body: object = None) -> Any:
        """The JSON answer of :meth:`admin`; a ValueError naming the address when it is not
        JSON."""
        answer = self.admin(method, path, body)
        return parse_json(answer, safe_url(self.admin_address(path)))

    def _bearer(self) -> Secret | None:
        if self.token is not None:
            return self.token
        if self.oauth2_issuer_url is not None:
            return oauth2.access_token(self)
        return None

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
        return failures.failure(self, error, address)


def _shown_path(path: Path | None) -> str | None:
    return None if path is None else str(path)


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
            f" got {shown(safe_url(value), 100)}",
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


__all__ = ["FLAGS", "ClusterConnection"]
