"""Pulsar's own unit tests, ported and named after the Java test methods, with the properties
they suggest."""

import pytest
from support.kinds import mark_folder

pytest_collection_modifyitems = mark_folder(__file__, pytest.mark.port)
