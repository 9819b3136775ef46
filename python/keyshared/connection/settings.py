"""A connection as the modules under :class:`~keyshared.connection.ClusterConnection` see
it: :class:`Settings`, what they read of it, and :class:`State`, what it learns as it is
used. They take a :class:`Settings` rather than the class itself because the class's module
imports them; the class is its one implementation."""

from __future__ import annotations

import ssl
import threading
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

from keyshared.connection.secret import Secret

_Built = TypeVar("_Built")


class State:
    """What a connection learns as it is used: its TLS contexts and openers, built once, and
    an OAuth 2.0 access token until it is due for renewal (monotonic seconds), and every
    secret it holds, to keep out of messages."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.openers: dict[str, urllib.request.OpenerDirector] = {}
        self.contexts: dict[str, ssl.SSLContext] = {}
        self.access_token: Secret | None = None
        self.renew_at = 0.0
        self.secrets: list[str] = []

    def __reduce__(self) -> tuple[type[State], tuple[()]]:
        # What was learned stays behind: a copy (deepcopy, asdict, pickle) starts afresh.
        return State, ()

    def built(self, cache: dict[str, _Built], purpose: str, build: Callable[[], _Built]) -> _Built:
        """What ``cache`` holds for ``purpose``, built by ``build`` the first time."""
        with self.lock:
            made = cache.get(purpose)
            if made is None:
                made = build()
                cache[purpose] = made
            return made


class Settings(Protocol):
    """The settings of a :class:`~keyshared.connection.ClusterConnection` (its fields, read
    only), how it authenticates, the role its token claims, and its :class:`State`."""

    @property
    def admin_url(self) -> str | None: ...
    @property
    def service_url(self) -> str | None: ...
    @property
    def token_from(self) -> str | None: ...
    @property
    def tls_cert(self) -> Path | None: ...
    @property
    def tls_key(self) -> Path | None: ...
    @property
    def oauth2_issuer_url(self) -> str | None: ...
    @property
    def oauth2_credentials(self) -> Path | None: ...
    @property
    def oauth2_audience(self) -> str | None: ...
    @property
    def oauth2_scope(self) -> str | None: ...
    @property
    def tls_trust_certs(self) -> Path | None: ...
    @property
    def tls_allow_insecure(self) -> bool: ...
    @property
    def tls_hostname_verification(self) -> bool: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def flags(self) -> Mapping[str, str]: ...
    @property
    def authentication(self) -> str: ...
    @property
    def _state(self) -> State: ...
    def role(self) -> str | None: ...


__all__ = ["Settings", "State"]
