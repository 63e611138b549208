r"""Moved to ``botorch_dp.methods.protocol``; this module keeps the old import path."""

from botorch_dp.methods.protocol import (
    CandidateMethod,
    MethodContext,
    MethodRun,
    MethodUnavailable,
    SimulatedMethod,
    config_delta,
    config_mu,
)

__all__ = [
    "CandidateMethod",
    "MethodContext",
    "MethodRun",
    "MethodUnavailable",
    "SimulatedMethod",
    "config_delta",
    "config_mu",
]
