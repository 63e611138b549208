r"""The tests are a package so that pytest puts the repository root on ``sys.path`` (not ``tests/``):
otherwise ``tests/benchmarks/`` would be imported as ``benchmarks`` and hide the top-level benchmark
harness ``benchmarks/`` that its tests import. Shared helpers: ``from tests.helpers import ...``.
"""
