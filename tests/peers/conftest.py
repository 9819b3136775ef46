"""Comparisons with the other clients' partitioners: librdkafka, Sarama and kafka-go."""

import pytest
from support.kinds import mark_folder

pytest_collection_modifyitems = mark_folder(__file__, pytest.mark.peers)
