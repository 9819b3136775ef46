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

The package's modules, one per concept: :mod:`~keyshared.connection.cluster` (the settings),
:mod:`~keyshared.connection.arguments` (the command line's flags),
:mod:`~keyshared.connection.client_conf` and :mod:`~keyshared.connection.properties`
(pulsar-admin's file), :mod:`~keyshared.connection.secret`,
:mod:`~keyshared.connection.timeout`, :mod:`~keyshared.connection.rest` (one HTTP request),
:mod:`~keyshared.connection.tls`, :mod:`~keyshared.connection.oauth2` and
:mod:`~keyshared.connection.failures`, which see a connection as
:mod:`~keyshared.connection.settings` says.
"""

from keyshared.connection.arguments import add_arguments, from_arguments
from keyshared.connection.client_conf import read_client_conf
from keyshared.connection.cluster import FLAGS, ClusterConnection
from keyshared.connection.failures import AnswerError, HttpStatusError
from keyshared.connection.properties import read_properties
from keyshared.connection.secret import Secret, token_from_env, token_from_file
from keyshared.connection.timeout import DEFAULT_TIMEOUT_S, MAX_SECONDS, check_timeout

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
