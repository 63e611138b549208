r"""GIBO's gradient-information acquisition as a BoTorch acquisition function.

``qGradientInformation`` scores a q-batch by how much it shrinks the trace of the GP's
posterior gradient covariance at the current iterate θ.
"""

from __future__ import annotations

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.models.model import Model
from botorch.utils.transforms import concatenate_pending_points, t_batch_mode_transform
from torch import Tensor

from botorch_dp.gradient_gp import DEFAULT_JITTER, GradientGP
from botorch_dp.kernel_derivatives import DerivativeBackend


class qGradientInformation(AcquisitionFunction):
    r"""Reduction of the posterior gradient-covariance trace at ``theta`` (to be maximized).

    ``α(z) = tr Σ_D(θ) − tr Σ_{D ∪ z ∪ X_pending}(θ)`` where ``Σ_D(θ)`` is the posterior
    covariance of ``∇f(θ)`` given the model's training inputs ``D`` (seed 000 / 001,
    GIBO). The value does not depend on the outcomes, so a model built on public points
    with placeholder outcomes is enough. The Cholesky factor of the training kernel
    matrix and ``L⁻¹∇k(θ, D)ᵀ`` are computed once; each candidate batch costs triangular
    solves against them.

    Example:
        >>> acqf = qGradientInformation(model, theta)
        >>> bounds = torch.stack([theta - 0.1, theta + 0.1])
        >>> X, val = optimize_acqf(acqf, bounds, q=4, num_restarts=4, raw_samples=64)

    Args:
        model: A single-output exact GP (e.g. ``SingleTaskGP``) with fixed
            hyperparameters, or a ``GradientGP``.
        theta: A ``d`` tensor, the point whose gradient we want to learn.
        X_pending: An ``m x d`` tensor of points that will be evaluated anyway.
        basis: An optional public ``d x k`` orthonormal basis ``Ṽ``: score the reduction of
            ``tr(Ṽᵀ Σ_D(θ) Ṽ)``, the uncertainty of the projected gradient ``Ṽᵀ∇f(θ)`` that
            a public-subspace release uses (seed 002, spec A5).
        jitter: Diagonal jitter (see ``GradientGP``); used when reading a BoTorch model.
        method: Backend for kernel derivatives (see ``KernelDerivatives``).
    """

    def __init__(
        self,
        model: Model | GradientGP,
        theta: Tensor,
        X_pending: Tensor | None = None,
        *,
        basis: Tensor | None = None,
        jitter: float = DEFAULT_JITTER,
        method: DerivativeBackend = "auto",
    ) -> None:
        super().__init__(model=model)
        gp = model if isinstance(model, GradientGP) else GradientGP.from_model(
            model, jitter=jitter, method=method
        )
        theta = theta.detach().reshape(-1).to(gp.train_X)
        if theta.shape[0] != gp.dim:
            raise ValueError(f"theta has {theta.shape[0]} entries, the model has d={gp.dim}.")
        self.gradient_gp = gp
        self.register_buffer("theta", theta)
        if basis is not None and (basis.dim() != 2 or basis.shape[0] != gp.dim):
            raise ValueError(f"basis must be d x k with d={gp.dim}, got shape {tuple(basis.shape)}.")
        self.register_buffer("basis", None if basis is None else basis.detach().to(gp.train_X))
        with torch.no_grad():
            self.register_buffer("_V", gp.whitened_cross(theta) if gp.num_train else None)
        self.set_X_pending(X_pending)

    @property
    def current_trace(self) -> Tensor:
        r"""``tr Σ_D(θ)`` (projected: ``tr(ṼᵀΣ_D(θ)Ṽ)``) before adding any point (a scalar tensor)."""
        return self.gradient_gp.posterior_trace(self.theta, self.basis)

    @concatenate_pending_points
    @t_batch_mode_transform()
    def forward(self, X: Tensor) -> Tensor:
        r"""Evaluate the trace reduction on candidate batches.

        Args:
            X: A ``batch_shape x q x d`` tensor of candidates.

        Returns:
            A ``batch_shape`` tensor of trace reductions (non-negative).
        """
        return self.gradient_gp.trace_reduction(self.theta, X, V=self._V, basis=self.basis)
