r"""The NON-PRIVATE reference of the ``mixed`` experiment: BoTorch's mixed BO
(``MixedSingleTaskGP`` with ``optimize_acqf_mixed``) on the public encoding of the mixed space."""

from __future__ import annotations

import warnings

import torch

from benchmarks.mixed_task import EncodedObjective, MixedEncoding
from botorch_dp.baselines import BaselineResult
from botorch_dp.baselines.base import incumbent_history

__all__ = ["mixed_bo"]


def mixed_bo(
    objective: EncodedObjective,
    encoding: MixedEncoding,
    *,
    budget: int,
    num_initial: int,
    batch: int,
    raw_samples: int,
    num_restarts: int,
    maxiter: int,
    seed: int,
) -> BaselineResult:
    r"""NON-PRIVATE BoTorch mixed BO on ``objective`` with ``budget`` evaluations.

    ``num_initial`` uniform encoded points, then batches of ``batch`` points from
    ``optimize_acqf_mixed`` (qLogExpectedImprovement on a ``MixedSingleTaskGP`` fitted to
    the negated mean losses, the categoricals as index coordinates, one fixed-feature dict per
    configuration; ``maxiter`` L-BFGS-B iterations). Returns the incumbent (best observed mean loss)
    in the cube encoding.
    """
    from botorch.acquisition.logei import qLogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import MixedSingleTaskGP
    from botorch.optim import optimize_acqf_mixed
    from gpytorch.mlls import ExactMarginalLogLikelihood

    d, c = encoding.space.dim, len(encoding.sizes)
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(min(num_initial, budget), encoding.dim, generator=gen, dtype=torch.float64)
    means = objective(X).mean(-1)
    sizes = torch.tensor(encoding.sizes, dtype=torch.float64)
    bounds = torch.cat(
        [torch.stack([torch.zeros(d), torch.ones(d)]).to(torch.float64), torch.stack([torch.zeros(c), sizes - 1])],
        dim=1,
    )
    fixed = [
        {d + j: float(i) for j, i in enumerate(row)}
        for row in torch.cartesian_prod(*[torch.arange(m) for m in encoding.sizes]).reshape(-1, c).tolist()
    ]
    while X.shape[0] < budget:
        Z = torch.cat([X[:, :d], encoding.indices(X).to(torch.float64)], dim=1)
        model = MixedSingleTaskGP(Z, -means[:, None], cat_dims=list(range(d, d + c)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            acq = qLogExpectedImprovement(model, best_f=float((-means).max()))
            q = min(batch, budget - X.shape[0])
            Znew, _ = optimize_acqf_mixed(
                acq,
                bounds,
                q=q,
                num_restarts=num_restarts,
                raw_samples=raw_samples,
                fixed_features_list=fixed,
                options={"maxiter": maxiter},
            )
        Xnew = torch.cat([Znew[:, :d], encoding.centres(Znew[:, d:].round().long())], dim=1)
        X = torch.cat([X, Xnew])
        means = torch.cat([means, objective(Xnew).mean(-1)])
    history = incumbent_history(X, means)
    return BaselineResult(
        theta=X[int(torch.argmin(means))], num_evaluations=X.shape[0], guarantee=None, history=history
    )
