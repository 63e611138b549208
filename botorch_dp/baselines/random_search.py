r"""Non-private random search: the best of ``m`` uniform points by observed mean loss.

Picking the best point looks at the sensitive losses without noise, so the result has
no privacy guarantee; it is the reference that the paper compares DP-GIBO against.
"""

from __future__ import annotations

import concurrent.futures as cf

import torch

from botorch_dp.baselines.base import BaselineResult, Objective, evaluate_losses, incumbent_history, uniform_points
from botorch_dp.utils import check_bounds


def random_search(
    objective: Objective,
    bounds: torch.Tensor,
    *,
    num_evaluations: int,
    seed: int = 0,
    batch_size: int = 32,
    executor: cf.Executor | None = None,
) -> BaselineResult:
    r"""Evaluate ``num_evaluations`` uniform points and return the one with the lowest mean loss.

    Args:
        objective: A ``PerUserProblem`` or a callable mapping a ``q x d`` tensor to
            ``q x n`` per-user losses (the mean over users is the objective).
        bounds: ``2 x d`` box.
        num_evaluations: ``m``, the number of points.
        seed: Seed of the (data-independent) points.
        batch_size: Points evaluated per call of ``objective``.
        executor: Evaluate the rows of each call on this ``concurrent.futures.Executor``
            (``evaluation.evaluate_rows``, losses in row order); ``None``: in this process.

    Returns:
        A NON-PRIVATE ``BaselineResult`` (``guarantee=None``). ``history.iterates[j]``
        is the best point among the first ``j + 1``; ``history.mean_losses`` are the
        observed mean losses.
    """
    bounds = check_bounds(bounds)
    if num_evaluations < 1:
        raise ValueError(f"num_evaluations must be >= 1, got {num_evaluations}.")
    gen = torch.Generator().manual_seed(int(seed))
    X = uniform_points(bounds, int(num_evaluations), gen)
    values, n = [], None
    for chunk in X.split(batch_size):
        losses = evaluate_losses(objective, chunk, n, executor=executor)
        n = losses.shape[1]
        values.append(losses.mean(-1))
    history = incumbent_history(X, torch.cat(values))
    return BaselineResult(
        theta=history.iterates[-1].clone(), num_evaluations=X.shape[0], guarantee=None, history=history
    )
