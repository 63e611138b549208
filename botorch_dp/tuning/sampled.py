r"""Moved to ``botorch_dp.methods.sampled`` (``SampledMethod``); this module keeps the old import path."""

from botorch_dp.methods.sampled import SAMPLE_PART, SampledMethod

__all__ = ["SAMPLE_PART", "SampledMethod"]
