"""Shared test settings."""

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from pyspark.sql import SparkSession

from spark_udfs.session import get_session

# Two shared cores make wall-clock deadlines meaningless; correctness is what is tested here.
settings.register_profile("keyshared", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("keyshared")

# One small local session for every Spark test: starting a JVM costs seconds, so it is shared.
SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_session("local[2]", "keyshared-tests", SPARK_TEST_CONF)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
