"""The data pipeline on Spark (issue 14): lab runs' logs audited at any size.

- ``session.py``: the one SparkSession builder (the Kafka connector's jars from
  ``make spark-jars``, no UI, few shuffle partitions when local);
- ``sources.py``: lines from files, directories, globs or a refka topic
  (``kafka://host:port/topic``), parsed strictly: a bad line is kept and said why;
- ``audit.py``: lab/scenarios/audit.py's definitions in DataFrames (violations,
  losses, duplicates, latency; leader-change windows, metadata traffic per client);
- ``report.py``: report.html with matplotlib plots;
- ``synth.py``: synthetic logs with planted faults and the summary they must give;
- ``bench.py``: the audit's throughput on synthetic logs.

``python -m lab.pipeline audit|synth`` (``__main__.py``); installed by ``make pipeline``.
"""
