r"""Global Bayesian optimization with upper confidence bounds (BoTorch, NON-PRIVATE).

A ``SingleTaskGP`` is fit by marginal likelihood on the observed mean losses (with
``Normalize`` inputs and ``Standardize`` outcomes, both fit on the sensitive losses,
which is fine only because this baseline makes no privacy claim).
"""

from __future__ import annotations

import concurrent.futures as cf
import warnings

import torch
from botorch.acquisition import AcquisitionFunction, UpperConfidenceBound, qUpperConfidenceBound
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from botorch.sampling import SobolQMCNormalSampler
from botorch.utils.sampling import draw_sobol_samples, manual_seed
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_dp.baselines.base import BaselineResult, Objective, evaluate_losses, incumbent_history
from botorch_dp.utils import check_bounds, progress_bar

#: Iteration cap of the L-BFGS marginal-likelihood fit.
FIT_MAXITER = 200
#: Wall-clock cap (seconds) of one fit.
FIT_TIMEOUT_S = 5.0


def _fit_model(X: torch.Tensor, y: torch.Tensor, bounds: torch.Tensor, state: dict | None, refit: bool) -> SingleTaskGP:
    r"""GP on ``(X, −y)`` (UCB maximizes); warm-started from ``state``, fitted if ``refit``."""
    from botorch.fit import fit_gpytorch_mll

    d = X.shape[1]
    model = SingleTaskGP(
        X, -y.unsqueeze(-1), input_transform=Normalize(d, bounds=bounds), outcome_transform=Standardize(m=1)
    )
    if state is not None:
        model.load_state_dict(
            {k: v for k, v in state.items() if not k.startswith(("outcome_transform", "input_transform"))}, strict=False
        )
    if refit or state is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # optimizer warnings on hard likelihoods; the fit falls back
            try:
                # one L-BFGS attempt with capped iterations: the default retries (up to 5
                # restarts from the priors) cost ~20 s per fit on 15-d problems here
                fit_gpytorch_mll(
                    ExactMarginalLogLikelihood(model.likelihood, model),
                    optimizer_kwargs={
                        "options": {"maxiter": FIT_MAXITER, "maxfun": 2 * FIT_MAXITER},
                        "timeout_sec": FIT_TIMEOUT_S,
                    },
                    max_attempts=1,
                )
            except Exception:  # pragma: no cover - keep the previous (or default) hyperparameters
                pass
    model.eval()
    return model


def ucb_bo(
    objective: Objective,
    bounds: torch.Tensor,
    *,
    num_evaluations: int,
    num_initial: int | None = None,
    beta: float = 2.0,
    batch_size: int = 1,
    refit_every: int = 1,
    num_restarts: int = 4,
    raw_samples: int = 256,
    seed: int = 0,
    progress: bool = False,
    executor: cf.Executor | None = None,
) -> BaselineResult:
    r"""UCB Bayesian optimization of the mean loss.

    ``num_initial`` scrambled-Sobol points, then batches of ``batch_size`` points
    maximizing ``UCB(x) = −μ(x) + sqrt(β) σ(x)`` of a GP on the negated mean losses
    (``UpperConfidenceBound`` for ``q = 1``, ``qUpperConfidenceBound`` otherwise), each
    found with ``optimize_acqf`` over the whole box, until ``num_evaluations`` points
    were evaluated. The GP hyperparameters are refit by ``fit_gpytorch_mll`` every
    ``refit_every`` batches (warm-started; in between the model is re-conditioned on all
    data with the previous hyperparameters).

    Args:
        objective: A ``PerUserProblem`` or a callable ``q x d -> q x n`` per-user losses.
        bounds: ``2 x d`` box.
        num_evaluations: Total evaluation budget.
        num_initial: Sobol points (default ``min(num_evaluations, 2(d + 1))``).
        beta: ``β`` of UCB.
        batch_size: Points per BO iteration.
        refit_every: Refit the hyperparameters every this many iterations.
        num_restarts: Passed to ``optimize_acqf``.
        raw_samples: Passed to ``optimize_acqf``.
        seed: Seed of the Sobol points and the acquisition optimization.
        progress: Show a tqdm bar.
        executor: Evaluate the rows of each call on this ``concurrent.futures.Executor``
            (``evaluation.evaluate_rows``, losses in row order); ``None``: in this process.

    Returns:
        A NON-PRIVATE ``BaselineResult``: ``theta`` is the best observed point;
        ``history.iterates[j]`` the best among the first ``j + 1`` evaluations;
        ``history.mean_losses`` the observed mean losses.
    """
    from botorch.optim import optimize_acqf

    bounds = check_bounds(bounds)
    d = bounds.shape[1]
    if num_evaluations < 1:
        raise ValueError(f"num_evaluations must be >= 1, got {num_evaluations}.")
    if batch_size < 1 or refit_every < 1:
        raise ValueError("batch_size and refit_every must be >= 1.")
    num_initial = min(num_evaluations, 2 * (d + 1) if num_initial is None else num_initial)
    X = draw_sobol_samples(bounds=bounds, n=num_initial, q=1, seed=seed).squeeze(1).to(torch.float64)
    losses = evaluate_losses(objective, X, executor=executor)
    n = losses.shape[1]
    y = losses.mean(-1)
    state, iteration = None, 0
    bar = progress_bar(total=num_evaluations, initial=X.shape[0], disable=not progress, desc="UCB-BO")
    try:
        while X.shape[0] < num_evaluations:
            q = min(batch_size, num_evaluations - X.shape[0])
            model = _fit_model(X, y, bounds, state, refit=iteration % refit_every == 0)
            state = model.state_dict()
            acqf: AcquisitionFunction
            if q == 1:
                acqf = UpperConfidenceBound(model, beta=beta)
            else:
                sampler = SobolQMCNormalSampler(torch.Size([128]), seed=seed + iteration)
                acqf = qUpperConfidenceBound(model, beta=beta, sampler=sampler)
            with manual_seed(seed * 100003 + iteration):
                cand, _ = optimize_acqf(acqf, bounds=bounds, q=q, num_restarts=num_restarts, raw_samples=raw_samples)
            cand = cand.detach().to(torch.float64)
            X = torch.cat([X, cand])
            y = torch.cat([y, evaluate_losses(objective, cand, n, executor=executor).mean(-1)])
            iteration += 1
            bar.update(q)
    finally:
        bar.close()
    history = incumbent_history(X, y, {"num_initial": num_initial, "beta": beta})
    return BaselineResult(
        theta=history.iterates[-1].clone(), num_evaluations=X.shape[0], guarantee=None, history=history
    )
