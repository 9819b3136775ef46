"""A secured Pulsar standalone broker for end-to-end tests, and the certificates and tokens it
and its clients use, all made at run time.

- :class:`Pki`: a certificate authority, a server certificate for the host name ``localhost``
  only (so that connecting to ``127.0.0.1``, where everything listens, is the wrong host
  name), and client certificates whose common name is their role (Pulsar's
  ``AuthenticationProviderTls``), as PEM files (keys in PKCS#8, as Pulsar reads them);
- :func:`make_token`: an HS256 token for a role, signed with a secret key (Pulsar's
  ``AuthenticationProviderToken`` with ``tokenSecretKey``);
- :class:`SecuredBroker`: Pulsar 4.2.4 standalone with token and TLS authentication and
  authorization on, TLS on the binary and web ports (the plain ports stay for the broker's
  own admin calls), three roles (:data:`ADMIN`, a superuser; :data:`VERIFIER`, an admin of
  tenant ``public``; :data:`NOBODY`, no permission) and their tokens, and a client
  certificate for :data:`VERIFIER`. The session fixture ``secured_broker``
  (tests/broker/conftest.py) shares one::

      def test_x(secured_broker: SecuredBroker) -> None:
          secured_broker.https_url          # https://localhost:<port>
          secured_broker.ssl_url            # pulsar+ssl://localhost:<port>
          secured_broker.ca                 # the CA file to trust
          secured_broker.tokens[VERIFIER]   # a token (str)
          secured_broker.token_file(VERIFIER)
          secured_broker.client_cert        # (cert, key) of VERIFIER
          secured_broker.admin("persistent/public/default/t", "PUT")   # as ADMIN
          secured_broker.secrets()          # every secret, to look for in output
"""

from __future__ import annotations

import base64
import datetime
import secrets
import shutil
import ssl
import tempfile
import urllib.error
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from support.pulsar_broker import (
    START_TIMEOUT_S,
    AdminError,
    PulsarBroker,
    error_reason,
    free_port,
)
from support.pulsar_oracle import NEWEST

#: The roles of the secured broker.
ADMIN, VERIFIER, NOBODY = "admin", "verifier", "nobody"

# RSA: Pulsar's PEM key reader takes RSA keys in every release.
_KEY_BITS = 2048
_VALID = datetime.timedelta(days=2)


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=_KEY_BITS)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class Pki:
    """A CA and the certificates it signs, as PEM files in ``folder``: :attr:`ca` (the CA's
    certificate), :attr:`server_cert` and :attr:`server_key` (for ``server_names``, DNS
    names), and :meth:`client` certificates."""

    def __init__(self, folder: Path, server_names: tuple[str, ...] = ("localhost",)) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC)
        self._now = now
        self._ca_key = _key()
        self._ca_name = _name("keyshared test CA")
        ca = (
            x509.CertificateBuilder()
            .subject_name(self._ca_name)
            .issuer_name(self._ca_name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = folder / "ca.pem"
        self.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.server_cert, self.server_key = self._issue(
            "server", server_names[0], ExtendedKeyUsageOID.SERVER_AUTH, server_names
        )

    def client(self, role: str) -> tuple[Path, Path]:
        """A client certificate whose common name is ``role``, and its key."""
        return self._issue(f"client-{role}", role, ExtendedKeyUsageOID.CLIENT_AUTH, ())

    def _issue(
        self, stem: str, common_name: str, usage: x509.ObjectIdentifier, names: tuple[str, ...]
    ) -> tuple[Path, Path]:
        key = _key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self._ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now - datetime.timedelta(minutes=5))
            .not_valid_after(self._now + _VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
            )
        cert = builder.sign(self._ca_key, hashes.SHA256())
        cert_path, key_path = self.folder / f"{stem}.pem", self.folder / f"{stem}-key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_pem_key(key))
        return cert_path, key_path

    def server_context(self, require_client_cert: bool = False) -> ssl.SSLContext:
        """A server's TLS context with the server certificate; asking for a client
        certificate signed by the CA when ``require_client_cert``."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.server_cert, self.server_key)
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=str(self.ca))
        return context


def make_secret_key() -> bytes:
    """A secret key for HS256 tokens (Pulsar's ``tokenSecretKey``)."""
    return secrets.token_bytes(32)


def make_token(secret_key: bytes, role: str) -> str:
    """A token of ``role`` (its ``sub``) signed with ``secret_key``, without expiry."""
    return jwt.encode({"sub": role}, secret_key, algorithm="HS256")


# The plugins and settings of token and TLS authentication, authorization, and TLS on both
# ports. The broker's own admin calls (the standalone starter creates public/default through
# them) and its own client go to the plain ports as the superuser; clients use the TLS ports.
_TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
_TLS_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
_TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


class SecuredBroker(PulsarBroker):
    """Pulsar standalone (``version``) with token and TLS authentication, authorization,
    and TLS on the binary and web ports, advertised as ``localhost`` (the name its
    certificate is for). Its roles are :data:`ADMIN` (superuser), :data:`VERIFIER` (an
    admin of tenant ``public``: it creates and deletes topics and reads their stats in
    public/default) and :data:`NOBODY` (no permission), each with a token in
    :attr:`tokens`; :attr:`client_cert` is a certificate of :data:`VERIFIER` for mutual TLS.
    :meth:`admin` calls the plain web port as :data:`ADMIN` and raises
    :class:`~support.pulsar_broker.AdminError` on an HTTP error."""

    def __init__(
        self,
        version: str = NEWEST,
        start_timeout_s: float = START_TIMEOUT_S,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="keyshared-secured-"))
        try:
            self.pki = Pki(self.folder / "pki")
            #: The certificate and key of :data:`VERIFIER`, for mutual TLS.
            self.client_cert = self.pki.client(VERIFIER)
            self.secret_key = make_secret_key()
            key_file = self.folder / "token-secret.key"
            key_file.write_bytes(self.secret_key)
            #: A token per role.
            self.tokens = {
                role: make_token(self.secret_key, role) for role in (ADMIN, VERIFIER, NOBODY)
            }
            tls_port, web_tls_port = free_port(), free_port()
            secured = {
                "webSocketServiceEnabled": "false",
                "advertisedAddress": "localhost",
                "authenticationEnabled": "true",
                "authenticationProviders": f"{_TOKEN_PROVIDER},{_TLS_PROVIDER}",
                "tokenSecretKey": key_file.as_uri(),
                "authorizationEnabled": "true",
                "superUserRoles": ADMIN,
                "brokerClientAuthenticationPlugin": _TOKEN_PLUGIN,
                "brokerClientAuthenticationParameters": f"token:{self.tokens[ADMIN]}",
                "brokerClientTlsEnabled": "false",
                "brokerServicePortTls": str(tls_port),
                "webServicePortTls": str(web_tls_port),
                "tlsCertificateFilePath": str(self.pki.server_cert),
                "tlsKeyFilePath": str(self.pki.server_key),
                "tlsTrustCertsFilePath": str(self.pki.ca),
                "tlsAllowInsecureConnection": "false",
                "tlsRequireTrustedClientCertOnConnect": "false",
            }
            super().__init__(
                version,
                start_timeout_s,
                {**secured, **(settings or {})},
                advertised_address="localhost",
                admin_headers={"Authorization": f"Bearer {self.tokens[ADMIN]}"},
            )
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        #: The TLS web port, by the name its certificate is for.
        self.https_url = f"https://localhost:{web_tls_port}"
        #: The TLS binary port, by the name its certificate is for.
        self.ssl_url = f"pulsar+ssl://localhost:{tls_port}"
        #: The CA that signed the broker's certificate.
        self.ca = self.pki.ca
        try:
            # The starter makes the superusers alone admins of tenant public.
            tenant = {"adminRoles": [ADMIN, VERIFIER], "allowedClusters": ["standalone"]}
            self.admin("tenants/public", "POST", tenant)
        except BaseException:
            self.close()
            raise

    def admin(self, path: str, method: str = "GET", body: Any = None) -> Any:
        """``/admin/v2/<path>`` as :data:`ADMIN`, as JSON; AdminError on an HTTP error."""
        try:
            return super().admin(path, method, body)
        except urllib.error.HTTPError as e:
            raise AdminError(method, path, e.code, error_reason(e.read())) from None

    def token_file(self, role: str) -> Path:
        """A file holding the token of ``role``."""
        path = self.folder / f"{role}.token"
        if not path.exists():
            path.write_text(self.tokens[role] + "\n")
        return path

    def secrets(self) -> list[str]:
        """Every secret of the broker and its clients, as text that must show in no output:
        the tokens, the token secret key (base64 and hex), and the body of each private key
        file."""
        found = list(self.tokens.values())
        found += [base64.b64encode(self.secret_key).decode(), self.secret_key.hex()]
        for key in (self.pki.server_key, self.client_cert[1]):
            lines = key.read_text().splitlines()
            found += [line for line in lines if line and not line.startswith("-----")]
        return found

    def close(self) -> None:
        try:
            super().close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> SecuredBroker:
        return self


__all__ = [
    "ADMIN",
    "NOBODY",
    "VERIFIER",
    "Pki",
    "SecuredBroker",
    "make_secret_key",
    "make_token",
]
