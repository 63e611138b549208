r"""Moved to ``botorch_dp.methods.choice``; this module keeps the old import path."""

from botorch_dp.methods.choice import (
    DEFAULT_METHODS,
    MethodComparison,
    MethodScore,
    _check_methods,  # noqa: F401  (old private name, still imported by old callers)
    compare_in_context,
    compare_methods,
)

__all__ = ["DEFAULT_METHODS", "MethodComparison", "MethodScore", "compare_in_context", "compare_methods"]
