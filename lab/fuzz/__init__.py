"""The hostile-client fuzzer: ``python -m lab.fuzz`` (``make fuzz``) against a
real broker, and ``python -m lab.fuzz.decoders`` (atheris) against the codec
alone. See each module's docstring."""
