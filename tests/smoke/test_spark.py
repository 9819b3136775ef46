"""Spark's registration: one local session, both engines, their answers checked against the
library's. scripts/wheels.sh installs PySpark beside every wheel; a missing PySpark fails."""

import pyspark  # noqa: F401
import pytest

import keyshared as ks
from keyshared.routing.partitioners import partition


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    from spark_udfs.session import get_session

    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "1",
    }
    session = get_session("local[1]", "keyshared-smoke", conf)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_register_gives_sql_the_librarys_answers(spark, engine: str) -> None:  # type: ignore[no-untyped-def]
    from spark_udfs import register

    layout = ks.TopicLayout.initial(4, bucket_budget=16)
    assert register(spark, layout, engine=engine) == engine
    row = spark.sql(
        "SELECT ks_key_hash('hello') AS h, ks_route('order-1') AS r, "
        "ks_partition('order-1', 12, 'kafka') AS p"
    ).first()
    assert row.h == ks.key_hash("hello")
    assert (row.r.segment_id, row.r.bucket) == layout.route("order-1")
    assert row.p == partition("order-1", 12, "kafka")
