"""The TLS side of a connection: its SSL contexts (for the cluster, and for an OAuth 2.0
issuer), what a certificate the cluster shows is for, and what an OpenSSL error says."""

from __future__ import annotations

import socket
import ssl
import urllib.error
from collections.abc import Callable
from typing import Any

from keyshared.connection.settings import Settings
from keyshared.errors import InvalidArgument

#: OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH.
HOSTNAME_MISMATCH = frozenset({62, 64})
#: OpenSSL's verify codes of a chain that ends at no trusted authority: a self-signed
#: certificate (18, 19), an issuer not found (2, 20) or a leaf nobody vouches for (21).
UNTRUSTED = frozenset({2, 18, 19, 20, 21})


def context(connection: Settings, purpose: str) -> ssl.SSLContext:
    """The TLS context of ``connection`` for ``purpose``, built once: ``"cluster"`` as
    :meth:`~keyshared.connection.ClusterConnection.ssl_context` says; ``"issuer"`` (an
    OAuth 2.0 issuer, most often outside the cluster) trusts the system's authorities and
    ``tls_trust_certs``, always checks, and shows no client certificate."""
    state = connection._state
    return state.built(state.contexts, purpose, lambda: _new_context(connection, purpose))


def _new_context(connection: Settings, purpose: str) -> ssl.SSLContext:
    flags = connection.flags
    made = ssl.create_default_context()
    trust_certs, cert, key = connection.tls_trust_certs, connection.tls_cert, connection.tls_key
    if trust_certs is not None:
        if purpose == "cluster":
            # As Pulsar's tlsTrustCertsFilePath: these authorities, not the system's.
            made = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        _load(
            lambda: made.load_verify_locations(cafile=str(trust_certs)),
            f"{flags['tls_trust_certs']}: {trust_certs} holds no PEM certificate",
            flags["tls_trust_certs"],
        )
    if purpose == "issuer":
        return made
    if cert is not None and key is not None:
        _load(
            lambda: made.load_cert_chain(str(cert), str(key)),
            f"{flags['tls_cert']} {cert} and {flags['tls_key']} {key}"
            " are not a PEM certificate and its private key",
            flags["tls_cert"],
        )
    if connection.tls_allow_insecure:
        made.check_hostname = False
        made.verify_mode = ssl.CERT_NONE
    elif not connection.tls_hostname_verification:
        made.check_hostname = False
    return made


def _load(load: Callable[[], None], refused: str, flag: str) -> None:
    """``load`` a file into a context; what OpenSSL says against it ends the line
    ``refused``, an error naming ``flag``."""
    try:
        load()
    except (ssl.SSLError, OSError) as e:
        raise InvalidArgument(f"{refused} ({ssl_reason(e)})", argument=flag) from None


def certificate_names(connection: Settings, host: str, port: int) -> list[str]:
    """The host names and addresses the server at ``host``:``port`` shows a certificate
    for, read by a second handshake (within ``connection``'s ``timeout_s``) that checks the
    certificate against its ``tls_trust_certs`` (else the system's authorities) but not the
    name; empty when that fails."""
    trust_certs = connection.tls_trust_certs
    lax = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    lax.check_hostname = False
    try:
        if trust_certs is not None:
            lax.load_verify_locations(cafile=str(trust_certs))
        else:
            lax.load_default_certs()
        with (
            socket.create_connection((host, port), connection.timeout_s) as raw,
            lax.wrap_socket(raw) as tls,
        ):
            cert: dict[str, Any] = dict(tls.getpeercert() or {})
    except (OSError, ValueError):
        return []
    alt = [str(v) for k, v in cert.get("subjectAltName", ()) if k in ("DNS", "IP Address")]
    if alt:
        return alt
    return [str(v) for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]


def verify_code(error: BaseException) -> int | None:
    """OpenSSL's verify code of ``error`` (or of the reason of urllib's error), if any."""
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    code = getattr(reason, "verify_code", None)
    return code if isinstance(code, int) else None


def ssl_reason(error: BaseException) -> str:
    """What OpenSSL says against a handshake or a file: its reason, else the message."""
    reason = getattr(error, "reason", None)
    return str(reason) if reason else str(error)


__all__ = [
    "HOSTNAME_MISMATCH",
    "UNTRUSTED",
    "certificate_names",
    "context",
    "ssl_reason",
    "verify_code",
]
