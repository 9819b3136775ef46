"""Comparisons with Pulsar's own classes, run through the oracle (oracle/, built by
scripts/pulsar.sh)."""

import pytest
from support.kinds import mark_folder

pytest_collection_modifyitems = mark_folder(__file__, pytest.mark.oracle, pytest.mark.pulsar)
