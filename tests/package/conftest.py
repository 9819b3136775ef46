"""The package as a user gets it: its exports, import graph, wheel, README and benchmark
floors."""

import pytest
from support.kinds import mark_folder

pytest_collection_modifyitems = mark_folder(__file__, pytest.mark.package)
