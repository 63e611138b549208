r"""What the DP-GIBO audit rows share: a small public setting, objectives whose users' losses
are linear in ``θ``, and samplers that drive ``DPGIBO`` through ``ask``/``tell`` as a user does.

The setting is deliberately tiny (``d = 1`` or 2, one to three steps, a handful of users,
a cheap public candidate search): the audited quantities do not depend on where the batch
points land, because every user's gradient estimate is far above or far below the clip
bound whatever the points are, so a run costs about 10 ms per step.

A linear loss ``w·(uᵀθ)`` has GP gradient estimate ``A y ≈ w u`` at any batch; with
``|w|`` in the thousands (or up to ``1e307``, to test overflow) the estimate is clipped to
``±B`` along it, so flipping the sign of ``w`` for one user moves the clipped mean by
exactly ``Δ = 2B/n`` when ``d = 1`` (along ``u`` up to the GP's small direction error when
``d > 1``). ``tests/audit/test_loop.py`` checks this on the non-private diagnostics.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from gpytorch.kernels import RBFKernel
from torch import Tensor

from botorch_dp.audit.statistics import Observations, StatisticSampler
from botorch_dp.optim import DPGIBO, DPGIBOConfig, DPGIBOResult
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.utils import child_seeds

__all__ = [
    "LARGE_SLOPE",
    "audit_config",
    "drive",
    "ledger_entry",
    "linear_users",
    "loop_sampler",
    "seeded_noise_allowed",
    "unit_direction",
]

#: The slope of a user whose estimate must be clipped: far above any clip bound used here.
LARGE_SLOPE = 1e4


def unit_direction(dim: int) -> Tensor:
    r"""``(1, …, 1)/√d``, the direction the audits' linear losses point along."""
    return torch.ones(dim, dtype=torch.float64) / dim**0.5


@contextlib.contextmanager
def seeded_noise_allowed() -> Iterator[None]:
    r"""Silence the ``PrivacyWarning`` of explicit noise seeds: the audits seed on purpose (to be reproducible)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


def audit_config(
    *, dim: int = 1, seed: int | None, num_iterations: int = 1, privacy_mu: float = 1.0, **options: Any
) -> DPGIBOConfig:
    r"""A ``DPGIBOConfig`` for an audit run: box ``[−1, 1]^d``, RBF kernel with unit
    length-scale, ``θ₀ = 0``, ``d + 1`` points per batch within 0.3 of ``θ``, and a cheap
    candidate search (one restart, 4 raw samples, one L-BFGS-B iteration: public and
    irrelevant to the audited statistics). ``options`` override or add fields."""
    kernel = RBFKernel(ard_num_dims=dim)
    kernel.lengthscale = 1.0
    settings: dict[str, Any] = dict(
        bounds=torch.tensor([[-1.0] * dim, [1.0] * dim], dtype=torch.float64),
        kernel=kernel,
        num_iterations=num_iterations,
        privacy_mu=privacy_mu,
        clip_bound=1.0,
        step_size=0.1,
        batch_size=dim + 1,
        search_radius=0.3,
        noise_variance=1e-6,
        num_restarts=1,
        raw_samples=4,
        acqf_maxiter=1,
        seed=seed,
    )
    settings.update(options)
    return DPGIBOConfig(**settings)


def linear_users(slopes: Sequence[float] | Tensor, directions: Tensor | None = None) -> Callable[[Tensor], Tensor]:
    r"""An objective whose user ``i`` has the loss ``slopes[i] · (u_iᵀθ)``.

    Args:
        slopes: ``n`` slopes (a user with slope 0 has loss 0 everywhere).
        directions: ``n x d`` unit directions ``u_i``, or ``None``: every user along
            ``unit_direction(d)`` (``d`` read from the points).

    Returns:
        ``X (q x d) -> q x n`` losses.
    """
    w = torch.as_tensor(slopes, dtype=torch.float64).reshape(-1)

    def objective(X: Tensor) -> Tensor:
        X = X.to(torch.float64)
        U = unit_direction(X.shape[-1]).expand(w.shape[0], -1) if directions is None else directions
        return (X @ U.transpose(0, 1)) * w  # q x n; w·(uᵀx) is finite for |w| ≤ 1e307, |x| ≤ 1

    return objective


def drive(optimizer: DPGIBO, objective: Callable[[Tensor], Tensor], *, steps: int | None = None) -> DPGIBOResult:
    r"""``ask``/``tell`` until the run is done (or ``steps`` tells were made), then ``result()``."""
    told = 0
    while not optimizer.is_done and (steps is None or told < steps):
        X = optimizer.ask()
        optimizer.tell(X, objective(X))
        told += 1
    return optimizer.result()


def loop_sampler(
    objective: Callable[[Tensor], Tensor],
    config: Callable[[int | None], DPGIBOConfig],
    observe: Callable[[DPGIBO, DPGIBOResult], tuple[float, float]],
    *,
    seeded: bool = True,
    via_run: bool = False,
) -> StatisticSampler:
    r"""A sampler of whole DP-GIBO runs on one dataset.

    Each run builds ``DPGIBO(config(seed))`` afresh (a seed from the sampler's stream, or
    ``None`` with ``seeded=False``: noise and candidate search from OS entropy, the
    library's default), drives it with ``ask``/``tell`` (or ``run(objective)`` with
    ``via_run``), and reads ``(statistic, claimed μ) = observe(optimizer, result)``.
    """

    def sample(num: int, stream: int) -> Observations:
        stats, claims = [], []
        seeds: list[int | None] = list(child_seeds([stream, 2], num)) if seeded else [None] * num
        with seeded_noise_allowed():
            for seed in seeds:
                optimizer = DPGIBO(config(seed))
                result = optimizer.run(objective, progress=False) if via_run else drive(optimizer, objective)
                stat, claim = observe(optimizer, result)
                stats.append(stat)
                claims.append(claim)
        return Observations(torch.tensor(stats, dtype=torch.float64), torch.tensor(claims, dtype=torch.float64))

    return sample


def ledger_entry(optimizer: DPGIBO, key: str) -> float:
    r"""The ``μ`` the run's ledger recorded for its release ``key`` (e.g. ``"step-0000/norm"``)."""
    return optimizer.ledger.validation.steps()[(optimizer.run_id, key)]
