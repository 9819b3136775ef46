"""pulsar-admin's ``client.conf``: the :class:`~keyshared.connection.ClusterConnection`
fields it gives, and the forms of its ``authPlugin`` and ``authParams`` (a token, a client
certificate, OAuth 2.0 client credentials) as Pulsar's clients read them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from keyshared.connection.properties import read_properties
from keyshared.connection.secret import Secret, file_url_path, token_from_file
from keyshared.errors import InvalidArgument
from keyshared.explain.stats import shown

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
        credentials = file_url_path(key_file) if key_file.startswith("file:") else Path(key_file)
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
        path = file_url_path(params)
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


__all__ = ["read_client_conf"]
