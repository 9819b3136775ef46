"""End-to-end tests against standalone Pulsar brokers the tests start and stop (on 127.0.0.1
only, every wait with a timeout)."""

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from support.kinds import mark_folder

if TYPE_CHECKING:
    from support.secure_broker import SecuredBroker

pytest_collection_modifyitems = mark_folder(__file__, pytest.mark.broker, pytest.mark.pulsar)


@pytest.fixture(scope="session")
def secured_broker() -> Iterator["SecuredBroker"]:
    """One Pulsar 4.2.4 standalone broker for the session with token and TLS
    authentication, authorization, and TLS on both ports (tests/support/secure_broker.py)."""
    from support.secure_broker import SecuredBroker

    with SecuredBroker() as running:
        yield running
