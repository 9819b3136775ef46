"""The SparkSession of the job, the tests and the benchmarks."""

import os
import sys
from collections.abc import Mapping

from pyspark import SparkConf
from pyspark.sql import SparkSession

from spark_udfs.jvm import EXTENSIONS, jar_path


def get_session(
    master: str | None = None,
    app_name: str = "keyshared",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """The active session, or a new one on ``master`` with ``conf``.

    Without a master the session takes spark-submit's, or ``local[*]`` when run directly. On
    a local master, Python workers run this interpreter, so they import the same keyshared
    build as the driver; on a cluster ``PYSPARK_PYTHON`` points at the shipped environment.
    """
    launched_by_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if master is None and not launched_by_submit:
        master = "local[*]"
    # local-cluster[...] starts separate executors, which take PYSPARK_PYTHON as a cluster does.
    if master is not None and (master == "local" or master.startswith("local[")):
        os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = dict(conf or {})
    # Under spark-submit the JVM already runs with its --jars and --conf; keep those too.
    submitted = SparkConf() if launched_by_submit else None
    for key, value in (("spark.jars", str(jar_path())), ("spark.sql.extensions", EXTENSIONS)):
        before = settings.get(key, submitted.get(key, "") if submitted is not None else "")
        given = [v for v in before.split(",") if v]
        settings[key] = ",".join(given if value in given else [*given, value])
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
