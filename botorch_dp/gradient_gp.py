r"""Posterior of the gradient of a GP with fixed hyperparameters.

``GradientGP`` holds the Cholesky factor of ``K = k(D, D) + σ²I`` and returns the posterior
mean, covariance and trace of ``∇f(θ)``, and the trace reduction from adding new points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.means import ConstantMean, ZeroMean
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from botorch_dp.kernel_derivatives import DerivativeBackend, KernelDerivatives

DEFAULT_JITTER = 1e-8


@dataclass
class GradientPosterior:
    r"""Gaussian posterior of ``∇f(θ)``.

    Attributes:
        mean: A ``batch_shape x d`` tensor.
        covariance: A ``batch_shape x d x d`` tensor ``Σ_D(θ)``.
    """

    mean: Tensor
    covariance: Tensor

    @property
    def trace(self) -> Tensor:
        r"""``tr Σ_D(θ)``, a ``batch_shape`` tensor."""
        return self.covariance.diagonal(dim1=-2, dim2=-1).sum(-1)


def _solve_lower(L: Tensor, B: Tensor) -> Tensor:
    r"""``L⁻¹ B`` for an ``N x N`` factor and a ``batch x N x r`` right-hand side.

    The batch is folded into the columns so that ``L`` is never expanded.
    """
    N, r = B.shape[-2:]
    if N == 0:
        return B
    batch = B.shape[:-2]
    rhs = B.movedim(-2, 0).reshape(N, -1)
    sol = torch.linalg.solve_triangular(L, rhs, upper=False)
    return sol.reshape(N, *batch, r).movedim(0, -2)


class GradientGP(torch.nn.Module):
    r"""The factorized gradient posterior of a fixed-kernel GP on public points ``D``.

    Not a GP with gradient observations: it observes values at ``D`` and answers questions
    about the gradient ``∇f(θ)`` (mean, covariance, trace, trace reduction of new points).

    With ``K = k(D, D) + diag(max(σ², jitter)) = LLᵀ`` and ``V(θ) = L⁻¹ ∇k(θ, D)ᵀ``:

    - posterior gradient mean ``∇k(θ, D) K⁻¹ (y − m) = V(θ)ᵀ L⁻¹ (y − m)``;
    - posterior gradient covariance ``Σ_D(θ) = ∇k∇ᵀ(θ, θ) − V(θ)ᵀ V(θ)``.

    The outcomes ``y`` are optional: the covariance, its trace and the acquisition depend
    on ``D`` and ``θ`` only. Outputs are multiplied by ``output_scale`` (mean) and
    ``output_scale²`` (covariances), which undoes an outcome standardization.

    Args:
        train_X: An ``N x d`` tensor of evaluated points ``D`` (``N`` may be 0).
        kernel: GPyTorch kernel with fixed hyperparameters.
        noise_variance: Observation-noise variance ``σ²``: a float, or an ``N`` tensor of
            per-point variances (new points then get their mean).
        train_Y: Optional ``N`` tensor of outcomes, used by ``posterior``.
        mean_constant: Constant prior mean ``m`` subtracted from ``train_Y``.
        output_scale: Scale of the outcomes (see above).
        jitter: Floor on the diagonal noise, so ``σ² = 0`` still gives a factorizable
            matrix; applies to new points too.
        method: Backend for kernel derivatives (see ``KernelDerivatives``).
    """

    def __init__(
        self,
        train_X: Tensor,
        kernel: Kernel,
        noise_variance: float | Tensor = 0.0,
        train_Y: Tensor | None = None,
        *,
        mean_constant: float = 0.0,
        output_scale: float = 1.0,
        jitter: float = DEFAULT_JITTER,
        method: DerivativeBackend = "auto",
    ) -> None:
        super().__init__()
        if train_X.dim() != 2:
            raise ValueError(f"train_X must be N x d, got shape {tuple(train_X.shape)}.")
        N = train_X.shape[0]
        noise = torch.as_tensor(noise_variance, dtype=train_X.dtype, device=train_X.device)
        if noise.dim() == 0:
            new_point_noise = float(noise)
            noise = noise.expand(N)
        else:
            if noise.shape != (N,):
                raise ValueError(f"noise_variance must be a float or an N={N} tensor.")
            new_point_noise = float(noise.mean()) if N > 0 else 0.0
        if (noise < 0).any() or new_point_noise < 0:
            raise ValueError("noise_variance must be non-negative.")
        self._set_parts(
            kernel=kernel,
            derivatives=KernelDerivatives(kernel, method=method),
            jitter=float(jitter),
            mean_constant=float(mean_constant),
            output_scale=float(output_scale),
            new_point_noise=new_point_noise,
            train_X=train_X,
            train_noise=noise,
            train_Y=None if train_Y is None else train_Y.reshape(N),
            L=None,
        )

    def _set_parts(
        self,
        *,
        kernel: Kernel,
        derivatives: KernelDerivatives,
        jitter: float,
        mean_constant: float,
        output_scale: float,
        new_point_noise: float,
        train_X: Tensor,
        train_noise: Tensor,
        train_Y: Tensor | None,
        L: Tensor | None,
    ) -> None:
        r"""Set every field; the one place a new field is added. ``L = None`` factorizes.

        The tensors are registered as buffers, so ``.to(device)`` and ``.double()`` move
        them together with the module.
        """
        self.kernel = kernel
        self.derivatives = derivatives
        self.jitter = jitter
        self.mean_constant = mean_constant
        self.output_scale = output_scale
        self.new_point_noise = new_point_noise
        self.register_buffer("train_X", train_X.detach())
        self.register_buffer("train_noise", train_noise.detach())
        self.register_buffer("train_Y", None if train_Y is None else train_Y.detach())
        self.register_buffer("L", (self._factor(self.train_X, self.train_noise) if L is None else L).detach())

    def _from_parts(self, train_X: Tensor, train_noise: Tensor, L: Tensor) -> "GradientGP":
        r"""A ``GradientGP`` with this one's kernel and settings on new data with a known factor."""
        gp = GradientGP.__new__(GradientGP)
        torch.nn.Module.__init__(gp)
        gp._set_parts(
            kernel=self.kernel,
            derivatives=self.derivatives,
            jitter=self.jitter,
            mean_constant=self.mean_constant,
            output_scale=self.output_scale,
            new_point_noise=self.new_point_noise,
            train_X=train_X,
            train_noise=train_noise,
            train_Y=None,
            L=L,
        )
        return gp

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_model(
        cls, model: torch.nn.Module, *, jitter: float = DEFAULT_JITTER, method: DerivativeBackend = "auto"
    ) -> "GradientGP":
        r"""Read data, kernel, noise and prior mean off a single-output exact GP.

        Supports BoTorch's ``SingleTaskGP`` (and other ``ExactGP`` models with a
        ``covar_module``) with a ``GaussianLikelihood`` or ``FixedNoiseGaussianLikelihood``,
        a ``ZeroMean`` or ``ConstantMean``, no input transform, and either no outcome
        transform or ``Standardize``. Nothing is fitted.

        Args:
            model: The GP.
            jitter: See ``GradientGP``.
            method: See ``KernelDerivatives``.

        Returns:
            A ``GradientGP`` on the model's training data.
        """
        if getattr(model, "num_outputs", 1) != 1:
            raise NotImplementedError("Only single-output models are supported.")
        if getattr(model, "input_transform", None) is not None:
            raise NotImplementedError(
                "Models with an input transform are not supported: the gradient would be "
                "taken in transformed coordinates. Transform the inputs yourself."
            )
        train_X = model.train_inputs[0]
        train_Y = model.train_targets
        if train_X.dim() != 2:
            raise NotImplementedError("Batched models are not supported.")
        mean_module = getattr(model, "mean_module", None)
        if mean_module is None or isinstance(mean_module, ZeroMean):
            mean_constant = 0.0
        elif isinstance(mean_module, ConstantMean):
            mean_constant = float(mean_module.constant.detach().reshape(()))
        else:
            raise NotImplementedError(f"Unsupported mean module {type(mean_module).__name__}.")
        likelihood = model.likelihood
        if isinstance(likelihood, FixedNoiseGaussianLikelihood):
            noise = likelihood.noise.detach().reshape(-1)
        elif isinstance(likelihood, GaussianLikelihood):
            noise = float(likelihood.noise.detach().reshape(()))
        else:
            raise NotImplementedError(f"Unsupported likelihood {type(likelihood).__name__}.")
        output_scale = 1.0
        transform = getattr(model, "outcome_transform", None)
        if transform is not None:
            from botorch.models.transforms.outcome import Standardize

            if not isinstance(transform, Standardize):
                raise NotImplementedError(
                    f"Unsupported outcome transform {type(transform).__name__}."
                )
            output_scale = float(transform.stdvs.detach().reshape(()))
        return cls(
            train_X,
            model.covar_module,
            noise,
            train_Y,
            mean_constant=mean_constant,
            output_scale=output_scale,
            jitter=jitter,
            method=method,
        )

    @classmethod
    def from_factor(
        cls, train_X: Tensor, factor: Tensor, kernel: Kernel, noise_variance: float, **kwargs: Any
    ) -> "GradientGP":
        r"""A ``GradientGP`` with a known Cholesky factor (e.g. restored from a checkpoint).

        Args:
            train_X: An ``N x d`` tensor.
            factor: The ``N x N`` lower Cholesky factor of ``k(D, D) + max(σ², jitter)I``.
            kernel: The kernel.
            noise_variance: Homoskedastic ``σ²``.
            kwargs: Other ``GradientGP`` keyword arguments.

        Returns:
            The ``GradientGP``; no factorization is done.
        """
        empty = cls(train_X[:0], kernel, noise_variance, **kwargs)
        N = train_X.shape[0]
        if factor.shape != (N, N):
            raise ValueError(f"factor must be {N} x {N}, got {tuple(factor.shape)}.")
        return empty._from_parts(train_X, empty.train_noise.new_full((N,), float(noise_variance)), factor)

    def condition_on(self, X_new: Tensor, noise_variance: float | Tensor | None = None) -> "GradientGP":
        r"""A new ``GradientGP`` on ``D ∪ X_new``, reusing the Cholesky factor.

        The factor of the augmented matrix is ``[[L, 0], [Wᵀ, chol(S)]]`` with
        ``W = L⁻¹ k(D, X_new)`` and ``S`` the Schur complement; outcomes are dropped.

        Args:
            X_new: A ``q x d`` tensor.
            noise_variance: Noise of the new points (float or ``q`` tensor); defaults to
                the new-point noise of this model.

        Returns:
            The conditioned ``GradientGP``.
        """
        q = X_new.shape[0]
        if noise_variance is None:
            noise_variance = self.new_point_noise
        noise_new = torch.as_tensor(noise_variance, dtype=X_new.dtype, device=X_new.device)
        noise_new = noise_new.expand(q).detach()
        with torch.no_grad():
            W, S = self._schur(X_new.detach(), noise_new)
            L_S = psd_safe_cholesky(S)
            N = self.num_train
            L = self.L.new_zeros(N + q, N + q)
            L[:N, :N] = self.L
            L[N:, :N] = W.transpose(-1, -2)
            L[N:, N:] = L_S
        train_X = torch.cat([self.train_X, X_new.detach()])
        return self._from_parts(train_X, torch.cat([self.train_noise, noise_new]), L)

    # ------------------------------------------------------------------ properties
    @property
    def num_train(self) -> int:
        return self.train_X.shape[0]

    @property
    def dim(self) -> int:
        return self.train_X.shape[1]

    # ------------------------------------------------------------------ gradient posterior
    def cross(self, theta: Tensor) -> Tensor:
        r"""``∇k(θ, D)``: a ``batch_shape x d x N`` tensor for ``batch_shape x d`` ``theta``."""
        return self.derivatives.cross(theta, self.train_X)

    def whitened_cross(self, theta: Tensor) -> Tensor:
        r"""``V(θ) = L⁻¹ ∇k(θ, D)ᵀ``: a ``batch_shape x N x d`` tensor."""
        return _solve_lower(self.L, self.cross(theta).transpose(-1, -2))

    def gradient_weights(self, theta: Tensor) -> Tensor:
        r"""``A = ∇k(θ, D) K⁻¹``, so that ``A y`` is the posterior gradient mean for data ``y``.

        One matrix serves every user: the per-user gradient estimates are ``A Y`` for
        the ``N x n`` matrix ``Y`` of per-user losses (``output_scale`` not applied).

        Args:
            theta: A ``batch_shape x d`` tensor.

        Returns:
            A ``batch_shape x d x N`` tensor.
        """
        cross = self.cross(theta)
        if self.num_train == 0:
            return cross
        rhs = cross.transpose(-1, -2)
        N, d = rhs.shape[-2:]
        batch = rhs.shape[:-2]
        sol = torch.cholesky_solve(rhs.movedim(-2, 0).reshape(N, -1), self.L)
        return sol.reshape(N, *batch, d).movedim(0, -2).transpose(-1, -2)

    def posterior_covariance(self, theta: Tensor) -> Tensor:
        r"""``Σ_D(θ) = ∇k∇ᵀ(θ, θ) − ∇k(θ, D) K⁻¹ k(D, θ)∇ᵀ``, ``batch_shape x d x d``."""
        V = self.whitened_cross(theta)
        cov = self.derivatives.prior(theta) - V.transpose(-1, -2) @ V
        return cov * self.output_scale**2

    def posterior_trace(self, theta: Tensor, basis: Tensor | None = None) -> Tensor:
        r"""``tr Σ_D(θ)`` as a ``batch_shape`` tensor (depends on ``D`` and ``θ`` only).

        With a ``d x k`` ``basis`` ``Ṽ``: the projected trace ``tr(Ṽᵀ Σ_D(θ) Ṽ)``, the
        posterior variance of ``Ṽᵀ∇f(θ)`` (seed 002, spec A5).
        """
        V = self.whitened_cross(theta)
        if basis is None:
            trace = self.derivatives.prior_trace(theta) - V.pow(2).sum((-1, -2))
        else:
            prior = self.derivatives.prior(theta)
            trace = (basis * (prior @ basis)).sum((-1, -2)) - (V @ basis).pow(2).sum((-1, -2))
        return trace * self.output_scale**2

    def posterior(self, theta: Tensor) -> GradientPosterior:
        r"""Posterior of ``∇f(θ)`` given ``train_Y``.

        Args:
            theta: A ``batch_shape x d`` tensor.

        Returns:
            ``GradientPosterior`` with a ``batch_shape x d`` mean and a
            ``batch_shape x d x d`` covariance.
        """
        if self.train_Y is None:
            raise ValueError("This GradientGP has no outcomes; pass train_Y.")
        y = (self.train_Y - self.mean_constant).unsqueeze(-1)
        mean = (self.gradient_weights(theta) @ y).squeeze(-1) * self.output_scale
        return GradientPosterior(mean=mean, covariance=self.posterior_covariance(theta))

    # ------------------------------------------------------------------ acquisition core
    def _factor(self, X: Tensor, noise: Tensor) -> Tensor:
        if X.shape[0] == 0:
            return X.new_zeros(0, 0)
        with torch.no_grad():
            K = self.kernel(X).to_dense()
            K = K + torch.diag_embed(noise.clamp_min(self.jitter))
            return psd_safe_cholesky(K)

    def _schur(self, X: Tensor, noise: Tensor | float) -> tuple[Tensor, Tensor]:
        r"""``W = L⁻¹ k(D, X)`` and ``S = k(X, X) + max(σ², jitter)I − WᵀW``.

        Args:
            X: A ``batch_shape x r x d`` tensor.
            noise: Noise variance of the new points (float or ``r`` tensor).

        Returns:
            ``W`` (``batch_shape x N x r``) and ``S`` (``batch_shape x r x r``).
        """
        r = X.shape[-2]
        noise = torch.as_tensor(noise, dtype=X.dtype, device=X.device).expand(r)
        S = self.kernel(X).to_dense() + torch.diag_embed(noise.clamp_min(self.jitter))
        if self.num_train == 0:
            return X.new_zeros(*X.shape[:-2], 0, r), S
        W = _solve_lower(self.L, self.kernel(self.train_X, X).to_dense())
        return W, S - W.transpose(-1, -2) @ W

    def trace_reduction(
        self, theta: Tensor, X: Tensor, V: Tensor | None = None, basis: Tensor | None = None
    ) -> Tensor:
        r"""``tr Σ_D(θ) − tr Σ_{D ∪ X}(θ)``, vectorized over candidate batches.

        Adding the ``r`` points of ``X`` changes the posterior by a rank-``r`` term:
        with ``S`` the Schur complement of the new block and
        ``C = ∇k(θ, X) − V(θ)ᵀ W`` the gradient/value covariance conditional on ``D``,
        the reduction is ``tr(C S⁻¹ Cᵀ) = ‖chol(S)⁻¹ Cᵀ‖²_F``. Only triangular solves
        against the existing factor are needed: ``O(N² r)`` per batch element.

        Args:
            theta: A ``d`` tensor (or broadcastable ``batch_shape x d``).
            X: A ``batch_shape x r x d`` tensor of new points.
            V: Optional precomputed ``whitened_cross(theta)`` (``N x d``).
            basis: Optional ``d x k`` ``Ṽ``: the reduction of the projected trace
                ``tr(Ṽᵀ Σ Ṽ)`` instead (``C`` replaced by ``ṼᵀC``; seed 002, spec A5).

        Returns:
            A ``batch_shape`` tensor of non-negative trace reductions.
        """
        W, S = self._schur(X, self.new_point_noise)
        C = self.derivatives.cross(theta, X)  # batch x d x r
        if self.num_train > 0:
            if V is None:
                V = self.whitened_cross(theta)
            C = C - V.transpose(-1, -2) @ W
        if basis is not None:
            C = basis.transpose(-1, -2) @ C  # k x r: only Ṽᵀ∇f is wanted
        if X.shape[-2] == 1:
            # q = 1 (greedy and adaptive batches): a square root and a division; torch's
            # batched Cholesky / triangular solves over many 1 x 1 systems are far slower.
            # S ≥ max(σ², jitter) holds exactly, so the floor only removes round-off.
            M = C.transpose(-1, -2) / S.clamp_min(max(self.new_point_noise, self.jitter)).sqrt()
        else:
            L_S = psd_safe_cholesky(S)
            M = torch.linalg.solve_triangular(L_S, C.transpose(-1, -2), upper=False)
        return M.pow(2).sum((-1, -2)) * self.output_scale**2


def gradient_posterior(
    model: torch.nn.Module, theta: Tensor, *, jitter: float = DEFAULT_JITTER, method: DerivativeBackend = "auto"
) -> GradientPosterior:
    r"""Posterior mean and covariance of ``∇f(θ)`` for a single-output exact GP.

    Nothing is fitted: the model's kernel hyperparameters and likelihood noise ``σ²``
    are used as they are (see ``GradientGP.from_model`` for the supported models).

    Args:
        model: E.g. a ``SingleTaskGP`` with fixed hyperparameters.
        theta: A ``d`` or ``batch_shape x d`` tensor.
        jitter: Diagonal floor of the kernel matrix.
        method: Kernel-derivative backend (see ``KernelDerivatives``).

    Returns:
        A ``GradientPosterior`` (``batch_shape x d`` mean, ``batch_shape x d x d`` covariance).
    """
    return GradientGP.from_model(model, jitter=jitter, method=method).posterior(theta)
