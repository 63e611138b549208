r"""The record of one benchmark run and the helpers that summarise runs.

A ``Run`` is one method on one seed: its loss curve against the number of evaluations
and its final values. Every loss in a ``Run`` is a NON-PRIVATE diagnostic (the noise-free
validation loss of what a method returned), computed only to evaluate the methods.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from botorch_dp.baselines import BaselineGuarantee, BaselineResult


@dataclass
class Run:
    r"""One run of one method: its curve and final values (losses are NON-PRIVATE diagnostics).

    Attributes:
        experiment: The experiment it belongs to (``"comparison"``, ``"eps"``, ...).
        method: The method's label in the tables and plots.
        seed: The replication seed.
        setting: The swept value (ε, μ, σ, ...) or a tag.
        evals: Cumulative evaluations at each point of the curve.
        losses: The loss of the method's choice at each point of the curve.
        final_loss: The last loss.
        num_evaluations: Evaluations used (expected trials for private random search).
        wall_s: Wall time of the run in seconds.
        epsilon: ε of the run's (ε, δ)-DP guarantee; ``None`` for non-private methods.
        extra: Further values (batch sizes, reference losses, distances, ...).
    """

    experiment: str
    method: str
    seed: int
    setting: Any
    evals: list[int]
    losses: list[float]
    final_loss: float
    num_evaluations: float
    wall_s: float
    epsilon: float | None = None
    extra: dict = field(default_factory=dict)


def mean_se(values: list[float]) -> tuple[float, float]:
    r"""Mean and standard error (``nan`` s.e. for a single value)."""
    values = [float(v) for v in values]
    m = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return m, se


def format_mean_se(values: list[float], digits: int = 4) -> str:
    r"""``"mean ± s.e."`` with ``digits`` significant digits (the mean alone for one value)."""
    m, se = mean_se(values)
    if math.isnan(se):
        return f"{m:.{digits}g}"
    return f"{m:.{digits}g} ± {se:.2g}"


def format_mu(mu: float) -> str:
    r"""``μ`` as text, ``"∞"`` for the non-private ``μ = inf``."""
    return "∞" if math.isinf(mu) else f"{mu:g}"


def round_sig(x: float, sig: int = 2) -> float:
    r"""``x`` rounded to ``sig`` significant digits."""
    return float(f"{x:.{sig}g}")


def group_by_method(runs: list[Run], experiment: str) -> dict[str, list[Run]]:
    r"""The runs of ``experiment`` grouped by method, in order of first appearance."""
    out: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        if r.experiment == experiment:
            out[r.method].append(r)
    return out


def num_seeds(runs: list[Run], *experiments: str) -> int:
    r"""Number of distinct seeds among the runs of ``experiments``."""
    return len({r.seed for r in runs if r.experiment in experiments})


def guarantee_of(result: BaselineResult) -> BaselineGuarantee:
    r"""The privacy guarantee of a private method's ``result`` (``ValueError`` if it has none)."""
    if result.guarantee is None:
        raise ValueError("a private method returned a result without a privacy guarantee")
    return result.guarantee


def iterate_curve(problem, result: BaselineResult) -> tuple[list[int], list[float]]:
    r"""Validation loss of the method's choice after each number of evaluations (NON-PRIVATE).

    Args:
        problem: The problem; ``problem.objective`` gives the noise-free validation loss.
        result: A method's result with its history of iterates.

    Returns:
        The cumulative evaluations and the loss of the iterate formed after them.
    """
    its, evals = result.history.iterates, result.history.evaluations
    uniq, inverse = torch.unique(its, dim=0, return_inverse=True)
    values = torch.cat([problem.objective(c) for c in uniq.split(64)]) if uniq.shape[0] else uniq.new_zeros(0)
    return [int(e) for e in evals], values[inverse].tolist()


def step_interp(evals: list[int], losses: list[float], grid: list[int]) -> list[float]:
    r"""Loss of the latest choice made with at most ``g`` evaluations, for ``g`` in ``grid``.

    Args:
        evals: Cumulative evaluations of a curve (increasing).
        losses: The curve's losses.
        grid: Evaluation counts to read the curve at.

    Returns:
        One loss per grid point; ``nan`` before the curve's first point.
    """
    out, j = [], 0
    for g in grid:
        while j + 1 < len(evals) and evals[j + 1] <= g:
            j += 1
        out.append(losses[j] if evals[j] <= g else math.nan)
    return out
