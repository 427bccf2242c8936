"""The one place a SparkSession is built for lab/pipeline.

pyspark's own jars have everything but Spark's Kafka connector; `make spark-jars`
(lab/pipeline/pom.xml) copies the connector and what it needs beyond pyspark's
jars into ``.cache/spark-jars/`` once, and ``spark.jars`` points there, so a
session downloads nothing at run time (``spark.jars.packages`` would, from
Maven, at every start).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[2]
# REFKA_SPARK_JARS: another directory of the same jars (an installed copy, a CI cache).
JARS_DIR = Path(os.environ.get("REFKA_SPARK_JARS", REPO / ".cache" / "spark-jars"))
MAKE_TARGET = "make spark-jars"
# The jars the Kafka source needs beyond pyspark's (a prefix of each file name).
REQUIRED_JARS = ("spark-sql-kafka-0-10_", "spark-token-provider-kafka-0-10_", "kafka-clients-", "commons-pool2-")

DRIVER_MEMORY = "2g"
LOCAL_SHUFFLE_PARTITIONS = 4  # local[*] on a small machine: Spark's 200 are 200 tiny tasks per shuffle


class MissingJars(RuntimeError):
    """The connector's jars are not where ``spark.jars`` would point."""


def connector_jars(jars_dir: Path = JARS_DIR) -> list[Path]:
    """The jars of ``jars_dir``; MissingJars, naming the make target, when one is missing."""
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    missing = [p for p in REQUIRED_JARS if not any(j.name.startswith(p) for j in jars)]
    if missing:
        raise MissingJars(f"Spark's Kafka connector is not in {jars_dir} (missing {', '.join(m + '*' for m in missing)}):"
                          f" run `{MAKE_TARGET}` (or `make pipeline`) first")
    return jars


def session(master: str | None = None, *, app_name: str = "refka-pipeline", shuffle_partitions: int | None = None,
            conf: dict[str, Any] | None = None) -> SparkSession:
    """A SparkSession on ``master`` (default ``local[*]``) with the connector's jars, no UI and
    UTC session time. ``shuffle_partitions``: default LOCAL_SHUFFLE_PARTITIONS when local, Spark's
    own (200) on a cluster, where each is a task of every shuffle: a small run on a small cluster
    wants few. ``conf`` adds or overrides settings."""
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    jars = connector_jars()
    # Executors (a standalone worker) run the Python this driver runs.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.jars", ",".join(str(j) for j in jars))
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", DRIVER_MEMORY)
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.adaptive.enabled", "true"))
    if master.startswith("local") or urlparse(master).hostname in ("127.0.0.1", "localhost"):
        # A session on this machine talks over loopback, not the host name's address.
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if shuffle_partitions is None and master.startswith("local"):
        shuffle_partitions = LOCAL_SHUFFLE_PARTITIONS
    if shuffle_partitions is not None:
        b = b.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for k, v in (conf or {}).items():
        b = b.config(k, str(v))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def stop_jvm(spark: SparkSession) -> None:
    """Stops the session and the driver's JVM with it. ``SparkSession.stop`` leaves the JVM
    running until this Python process exits, and with it anything static in it: the Kafka
    connector's cached producers go on reconnecting to brokers long gone (a test suite's
    later minutes, spent next to an idle gigabyte JVM that logs warnings)."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None
