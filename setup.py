"""The one compiled module (the rest is pyproject.toml): record_walk.py's walk in C,
optional, so that refka installs without a C compiler and walks records in Python
there (refka/protocol/record_walk.py says what it costs either way)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("refka.protocol._record_walk", ["refka/protocol/_record_walk.c"], optional=True)])
