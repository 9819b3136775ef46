"""Unit tests of the library's own behaviour: cases, properties, and stateful runs against small
Python models."""

import pytest
from support.kinds import mark_folder

pytest_collection_modifyitems = mark_folder(__file__, pytest.mark.unit)
