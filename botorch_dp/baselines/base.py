r"""The result type shared by the baselines and the helpers that read their inputs.

``BaselineResult`` holds the chosen ``θ``, the number of evaluations, the privacy
guarantee (``None`` for non-private methods) and a ``BaselineHistory`` for plots;
``incumbent_history`` builds the best-so-far history of the search methods.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from botorch_dp.evaluation import evaluate_rows
from botorch_dp.objectives.per_user_problem import PerUserProblem
from botorch_dp.privacy.checks import check_losses

Objective = PerUserProblem | Callable[[Tensor], Tensor]
"""A ``PerUserProblem`` or any callable mapping a ``q x d`` tensor to ``q x n`` losses."""


@dataclass
class BaselineGuarantee:
    r"""The validation-data guarantee of a private baseline.

    Attributes:
        epsilon: ``ε`` of the ``(ε, δ)``-DP statement.
        delta: ``δ`` of the ``(ε, δ)``-DP statement.
        mu: Total GDP parameter when the method is ``μ``-GDP (noisy gradient
            descent), ``None`` when the guarantee is not a GDP statement (private
            selection, whose bound is in Rényi DP).
        description: How the guarantee was derived, in words.
        details: Further public parameters (per-trial budget, distribution, ...).
    """

    epsilon: float
    delta: float
    mu: float | None = None
    description: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class BaselineHistory:
    r"""What a baseline did, for curves and checks.

    Attributes:
        iterates: ``m x d`` tensor, the method's choice of ``θ`` after
            ``evaluations[j]`` evaluations (the incumbent for search methods, the
            iterate for descent methods).
        evaluations: ``m`` long tensor, evaluations used when ``iterates[j]`` was chosen.
        points: ``N x d`` tensor of the points at which the objective was evaluated.
        mean_losses: ``N`` observed mean losses at ``points`` (NON-PRIVATE), or
            ``None`` for methods that never form them.
        public: Whether every field may be published under the method's guarantee.
            ``False`` for non-private methods and for private selection (whose bound
            relies on the number of trials staying hidden).
        extras: Method-specific values (documented by each method).
    """

    iterates: Tensor
    evaluations: Tensor
    points: Tensor
    mean_losses: Tensor | None = None
    public: bool = False
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class BaselineResult:
    r"""Result of a baseline run.

    Attributes:
        theta: The ``d`` tensor the method returns.
        num_evaluations: Number of objective (or per-user gradient) evaluations used.
        guarantee: ``BaselineGuarantee`` of a private method; ``None`` when the
            method is not private.
        history: The ``BaselineHistory``.
    """

    theta: Tensor
    num_evaluations: int
    guarantee: BaselineGuarantee | None
    history: BaselineHistory

    @property
    def is_private(self) -> bool:
        r"""Whether the method carries a differential-privacy guarantee."""
        return self.guarantee is not None

    def private_guarantee(self) -> BaselineGuarantee:
        r"""The guarantee of a private method (``ValueError`` for a non-private one)."""
        if self.guarantee is None:
            raise ValueError("This baseline result has no guarantee: the method is not private.")
        return self.guarantee


def evaluate_losses(
    objective: Objective,
    X: Tensor,
    num_users: int | None = None,
    *,
    executor: cf.Executor | None = None,
    nonfinite: str = "refuse",
) -> Tensor:
    r"""Per-user losses at ``X``, checked for shape and finiteness.

    Args:
        objective: A ``PerUserProblem`` or a callable ``q x d -> q x n``.
        X: A ``q x d`` tensor.
        num_users: The expected ``n`` (``None``: any).
        executor: Evaluate the rows of ``X`` on this ``concurrent.futures.Executor``
            (``evaluation.evaluate_rows``); ``None``: ``objective(X)`` in this process.
        nonfinite: ``"refuse"`` (default): a NaN or infinite loss raises. ``"zero_user"``: such
            an entry is set to 0 (that user's term of that point's clipped mean is 0, which keeps
            a ``[0, C]``-clipped mean's sensitivity at ``C/n``; private selection's policy).

    Returns:
        A ``q x n`` float64 tensor (SENSITIVE).
    """
    losses = evaluate_rows(objective, X, executor=executor)
    if not isinstance(losses, Tensor):
        losses = torch.as_tensor(losses)
    if losses.dim() == 1 and X.shape[0] == 1:
        losses = losses.unsqueeze(0)
    check_losses(losses, X.shape[0], num_users, nonfinite=nonfinite)
    losses = losses.to(torch.float64)
    return losses.nan_to_num(0.0, 0.0, 0.0) if nonfinite == "zero_user" else losses


def uniform_points(bounds: Tensor, num_points: int, generator: torch.Generator) -> Tensor:
    r"""``num_points x d`` uniform points in the box (data independent)."""
    u = torch.rand(num_points, bounds.shape[1], generator=generator, dtype=torch.float64)
    return bounds[0] + u * (bounds[1] - bounds[0])


def incumbent_history(X: Tensor, values: Tensor, extras: dict[str, Any] | None = None) -> BaselineHistory:
    r"""The best-so-far (incumbent) history of a search over evaluated points.

    Args:
        X: ``N x d`` points, in the order they were evaluated.
        values: ``N`` observed mean losses at ``X`` (NON-PRIVATE).
        extras: Method-specific values for ``BaselineHistory.extras``.

    Returns:
        A NON-PUBLIC ``BaselineHistory``: ``iterates[j]`` is the best among the first
        ``j + 1`` points (the latest one on ties, as ``torch.cummin``), so
        ``iterates[-1]`` is the search's result; ``evaluations`` is ``1..N`` and
        ``mean_losses`` are ``values``.
    """
    return BaselineHistory(
        iterates=X[torch.cummin(values, 0).indices],
        evaluations=torch.arange(1, X.shape[0] + 1),
        points=X,
        mean_losses=values,
        public=False,
        extras={} if extras is None else extras,
    )


def noisy_selection(
    X: Tensor, scores: Tensor, bounds: Tensor, fallback: Tensor | None, extras: dict[str, Any] | None = None
) -> tuple[Tensor, BaselineHistory]:
    r"""The released point of a private selection over trials with noisy scores (lowest wins),
    and its NON-PUBLIC history.

    Args:
        X: ``K x d`` trial points, in the order they were scored (``K`` may be 0).
        scores: ``K`` released noisy scores.
        bounds: ``2 x d`` box; its centre is released when ``K = 0`` and no ``fallback``.
        fallback: The data-independent point released when ``K = 0`` (``d`` values), or None.
        extras: Method-specific values added to ``BaselineHistory.extras`` (next to
            ``noisy_scores`` and ``released_score``).

    Returns:
        ``(theta, history)``: ``theta`` the best-scored trial (the latest on ties, as
        ``torch.cummin``) or the fallback; ``history.iterates`` the best-so-far trials
        (``X`` itself when ``K = 0``) and ``extras["released_score"]`` the winner's noisy
        score (None when ``K = 0``).
    """
    K = X.shape[0]
    if K == 0:
        d = bounds.shape[1]
        theta = bounds.mean(0) if fallback is None else torch.as_tensor(fallback, dtype=torch.float64).reshape(d)
        running, released_score = torch.empty(0, dtype=torch.long), None
    else:
        running = torch.cummin(scores, 0).indices
        theta = X[running[-1]].clone()
        released_score = float(scores[running[-1]])
    history = BaselineHistory(
        iterates=X[running] if K else X,
        evaluations=torch.arange(1, K + 1),
        points=X,
        mean_losses=None,
        public=False,
        extras={"noisy_scores": scores, "released_score": released_score, **(extras or {})},
    )
    return theta, history
