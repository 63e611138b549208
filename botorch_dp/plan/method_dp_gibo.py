r"""Moved to ``botorch_dp.methods.dp_gibo``; this module keeps the old import path."""

from botorch_dp.methods.dp_gibo import DPGIBOMethod

__all__ = ["DPGIBOMethod"]
