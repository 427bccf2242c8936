"""Benchmarks: refka against Tansu and librdkafka's mock cluster, and the codec.

``python -m lab.bench`` (``make bench``) runs the end-to-end comparison, see
``__main__.py`` and README.md; ``python -m lab.bench.codec`` times the codec's
hot paths. Figures only: speed targets live here, never in timed test
assertions.
"""
