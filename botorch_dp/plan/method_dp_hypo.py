r"""Moved to ``botorch_dp.methods.dp_hypo``; this module keeps the old import path."""

from botorch_dp.methods.dp_hypo import DENSITY_UPDATES, MAX_MEAN_TRIALS, RATIO_LADDER, DPHyPOMethod

__all__ = ["DENSITY_UPDATES", "MAX_MEAN_TRIALS", "RATIO_LADDER", "DPHyPOMethod"]
