r"""The rows of ``PrivatePlan.table``: one fixed-width line per ``PlanTrial`` (``plan.search``, not imported
here: it imports this module) and its standard error."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["row", "spread"]


def spread(trial: Any) -> str:
    r"""The standard error of the trial's mean proxy loss over its repeats (``n/a`` with one)."""
    r = len(trial.proxy_losses)
    if r < 2:
        return "n/a"
    mean = trial.mean_proxy_loss
    return f"{math.sqrt(math.fsum((x - mean) ** 2 for x in trial.proxy_losses) / (r - 1) / r):.2g}"


def row(mark: str, t: Any) -> str:
    rule = "fixed" if t.bias_tolerance is None else f"tol {t.bias_tolerance:.3g}"
    return (
        f"{mark:1} {rule:>12} {t.clip_quantile:>8.3g} {t.clip_bound:>10.4g} {t.step_size:>8.3g} {t.num_iterations:>4d} "
        f"{t.mean_proxy_loss:>11.5g} {spread(t):>9} {t.noise_std:>10.3g} {t.noise_to_signal:>12.3g}"
    )
