"""One HTTP request of a connection (to the cluster's admin REST endpoint or to an OAuth 2.0
issuer), with its TLS settings and the cluster's redirects, bounded as a whole by the
connection's timeout."""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from keyshared.connection.failures import error_detail, request_failure
from keyshared.connection.secret import safe_url
from keyshared.connection.settings import Settings
from keyshared.connection.tls import HOSTNAME_MISMATCH, certificate_names, context, verify_code

# The most of an HTTP error's body read for its reason.
_ERROR_BODY_LIMIT = 16 * 1024


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


def send(
    connection: Settings, request: urllib.request.Request, purpose: str, url_flag: str, what: str
) -> bytes:
    """The body of ``request``'s answer within ``connection``'s ``timeout_s``, or the error
    that says why not (``purpose`` picks the TLS context, ``"cluster"`` or ``"issuer"``;
    ``url_flag`` names the setting of its address, ``what`` the request in a 403's
    message)."""
    opener = _opener(connection, purpose) if request.type == "https" else _PLAIN
    parts = urllib.parse.urlsplit(request.full_url)
    timeout_s = connection.timeout_s
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
                detail.append(error_detail(e.read(_ERROR_BODY_LIMIT)))
            except (OSError, http.client.HTTPException):
                detail.append(None)
            finally:
                e.close()
            outcome.append(e)
        except BaseException as e:  # handed to the caller's thread
            if verify_code(e) in HOSTNAME_MISMATCH:
                names.append(certificate_names(connection, parts.hostname or "", parts.port or 443))
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
    raise request_failure(
        connection,
        result,
        safe_url(request.full_url),
        purpose,
        url_flag,
        what,
        detail[0] if detail else None,
        names[0] if names else [],
    )


def _opener(connection: Settings, purpose: str) -> urllib.request.OpenerDirector:
    """An opener with the TLS context of ``purpose``, built once."""
    tls = context(connection, purpose)
    state = connection._state
    return state.built(
        state.openers,
        purpose,
        lambda: urllib.request.build_opener(urllib.request.HTTPSHandler(context=tls), _Redirects()),
    )


def same_origin(address: str, url: str) -> bool:
    """Whether ``address`` has the scheme, host and port of ``url`` (default ports
    included)."""
    return _origin(address) == _origin(url)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port or default


__all__ = ["same_origin", "send"]
