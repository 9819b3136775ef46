"""End-to-end tests against standalone Pulsar brokers the tests start and stop (on 127.0.0.1
only, every wait with a timeout)."""

import pytest
from support.kinds import mark_folder

pytest_collection_modifyitems = mark_folder(__file__, pytest.mark.broker, pytest.mark.pulsar)
