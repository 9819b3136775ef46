"""The command line's connection flags: :func:`add_arguments` adds them to a command's
parser and :func:`from_arguments` makes the :class:`~keyshared.connection.ClusterConnection`
they describe."""

from __future__ import annotations

import argparse
from typing import Any

from keyshared.connection.cluster import FLAGS, ClusterConnection
from keyshared.connection.secret import Secret, token_from_env, token_from_file


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
    return ClusterConnection.from_client_conf(args.client_conf, **given, flags=flags)


__all__ = ["add_arguments", "from_arguments"]
