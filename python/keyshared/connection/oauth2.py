"""OAuth 2.0 client credentials (Pulsar's ``AuthenticationOAuth2``): an access token from
the issuer by the client-credentials grant, kept until it is due for renewal."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from keyshared._jsonfile import parse_json
from keyshared.connection.rest import send
from keyshared.connection.secret import Secret, safe_url
from keyshared.connection.settings import Settings
from keyshared.errors import ClusterAccessError, InvalidArgument

# Pulsar's AuthenticationOAuth2 renews a token at 90% of its lifetime (EXPIRY_ADJUSTMENT).
_RENEW_AT = 0.9


def access_token(connection: Settings) -> Secret:
    """An access token from ``connection``'s issuer by the client-credentials grant (RFC
    6749 4.4, as Pulsar's ClientCredentialsFlow asks it), kept until 90% of its
    lifetime."""
    state = connection._state
    with state.lock:
        if state.access_token is not None and time.monotonic() < state.renew_at:
            return state.access_token
    flag = connection.flags["oauth2_issuer_url"]
    endpoint = _token_endpoint(connection)
    client_id, client_secret = _client_credentials(connection)
    form = {
        "grant_type": "client_credentials",
        "client_id": client_id,
        "client_secret": client_secret.reveal(),
    }
    if connection.oauth2_audience:
        form["audience"] = connection.oauth2_audience
    if connection.oauth2_scope:
        form["scope"] = connection.oauth2_scope
    request = urllib.request.Request(
        endpoint,
        data=urllib.parse.urlencode(form).encode("ascii"),
        method="POST",
        headers={
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    answer = _issuer_json(connection, request)
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise ClusterAccessError(
            f"{safe_url(endpoint)}: the issuer's answer holds no access_token",
            kind="oauth2_refused",
            argument=flag,
        )
    lifetime = answer.get("expires_in")
    seconds = float(lifetime) if isinstance(lifetime, int | float) and lifetime > 0 else 0.0
    kept = Secret(token)
    with state.lock:
        state.secrets.append(token)
        state.access_token = kept
        state.renew_at = time.monotonic() + seconds * _RENEW_AT
    return kept


def _token_endpoint(connection: Settings) -> str:
    """The ``token_endpoint`` of the issuer's OpenID configuration."""
    flag = connection.flags["oauth2_issuer_url"]
    well_known = f"{str(connection.oauth2_issuer_url).rstrip('/')}/.well-known/openid-configuration"
    metadata = _issuer_json(
        connection, urllib.request.Request(well_known, headers={"Accept": "application/json"})
    )
    endpoint = metadata.get("token_endpoint") if isinstance(metadata, dict) else None
    if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
        raise ClusterAccessError(
            f"{well_known}: no token_endpoint: check {flag}", kind="unreachable", argument=flag
        )
    return endpoint


def _issuer_json(connection: Settings, request: urllib.request.Request) -> Any:
    """The JSON answer of an OAuth 2.0 issuer; its refusal (HTTP 400 or 401) is a
    ClusterAccessError of kind ``oauth2_refused`` in the words of its ``error`` and
    ``error_description``."""
    flag = connection.flags["oauth2_issuer_url"]
    body = send(connection, request, "issuer", flag, request.full_url)
    return parse_json(body, safe_url(request.full_url))


def _client_credentials(connection: Settings) -> tuple[str, Secret]:
    """``client_id`` and ``client_secret`` of the ``oauth2_credentials`` file (Pulsar's
    KeyFile JSON)."""
    flag = connection.flags["oauth2_credentials"]
    path = connection.oauth2_credentials
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
    with connection._state.lock:
        connection._state.secrets.append(secret)
    return client_id, Secret(secret)


__all__ = ["access_token"]
