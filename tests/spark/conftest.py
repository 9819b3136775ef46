"""Spark: the UDFs on both engines, the job, and a local cluster of separate executors."""

import pytest
from support.kinds import mark_folder

pytest_collection_modifyitems = mark_folder(__file__, pytest.mark.spark)
