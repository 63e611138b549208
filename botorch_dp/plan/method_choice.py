r"""Moved to ``botorch_dp.methods.choice``; this module keeps the old import path."""

from botorch_dp.methods.choice import (
    DEFAULT_METHODS,
    MethodComparison,
    MethodScore,
    compare_in_context,
    compare_methods,
)

__all__ = ["DEFAULT_METHODS", "MethodComparison", "MethodScore", "compare_in_context", "compare_methods"]
