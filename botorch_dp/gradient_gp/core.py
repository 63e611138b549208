r"""``GradientGP``: the factorized gradient posterior of a GP with fixed hyperparameters.

A ``GradientGP`` holds the Cholesky factor of ``K = k(D, D) + σ²I`` on the public points
``D`` and returns the posterior mean, covariance and trace of ``∇f(θ)`` (a
``GradientPosterior``), and the trace reduction from adding new points; ``condition_on``
extends the factor by a Schur update. ``TensorSnapshot`` tells whether the kernel changed
since the factor was computed. Reading a ``GradientGP`` off a BoTorch model is in
``models``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from gpytorch.kernels import Kernel
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from botorch_dp.gradient_gp.exact import exact_gp_parts
from botorch_dp.kernel_derivatives import DerivativeBackend, KernelDerivatives

__all__ = ["DEFAULT_JITTER", "GradientGP", "GradientPosterior", "TensorSnapshot"]

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


class TensorSnapshot:
    r"""Copies of a module's parameters and buffers, to tell whether they changed since.

    GPyTorch sets hyperparameters through ``.data`` (``kernel.lengthscale = 2.0``), which
    leaves a tensor's version counter alone, so values are compared.

    Args:
        module: The module (e.g. a kernel or a whole model) to watch.
    """

    def __init__(self, module: torch.nn.Module) -> None:
        self._tensors = [*module.parameters(), *module.buffers()]
        self._values = [t.detach().clone() for t in self._tensors]

    def changed(self, *, same_dtype: bool = False) -> bool:
        r"""Whether any watched value differs from its copy.

        Args:
            same_dtype: Also count a move to another dtype or device as a change;
                otherwise the copy is cast to the tensor's dtype and device first.
        """
        for t, saved in zip(self._tensors, self._values, strict=True):
            if saved.dtype != t.dtype or saved.device != t.device:
                if same_dtype:
                    return True
                saved = saved.to(t)
            if not torch.equal(t, saved):
                return True
        return False


def _to_input_space(G: Tensor, jacobian: Tensor | None) -> Tensor:
    r"""``JᵀG``: a ``batch x d_z x r`` block of gradients in ``z`` as gradients in ``x``."""
    return G if jacobian is None else jacobian.transpose(-1, -2) @ G


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

    Input transforms (chain rule): when the GP lives on ``z = T(x)``, the gradient in ``x``
    is ``Jᵀ∇_z f`` with ``J = ∂z/∂x`` at ``θ``. The methods that take ``jacobian`` (a
    ``batch_shape x d_z x d_x`` tensor) return gradients in ``x``: ``θ`` and the points stay
    in ``z``, every gradient block ``G`` becomes ``JᵀG``.

    The kernel's hyperparameters are copied when the factor is computed: if they change
    afterwards the factor is stale, ``kernel_changed()`` says so and ``condition_on``
    refuses. Build a new ``GradientGP`` then.

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

    # buffers, registered by ``_set_parts`` (annotated here: ``torch.nn.Module.__getattr__``
    # would type them as ``Tensor | Module``)
    train_X: Tensor
    train_noise: Tensor
    train_Y: Tensor | None
    L: Tensor

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
            kernel_state=None,
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
        kernel_state: TensorSnapshot | None,
    ) -> None:
        r"""Set every field; the one place a new field is added. ``L = None`` factorizes.

        The tensors are registered as buffers, so ``.to(device)`` and ``.double()`` move
        them together with the module. ``kernel_state`` is the kernel as ``L`` was
        computed (``None``: as it is now).
        """
        self._kernel_state = TensorSnapshot(kernel) if kernel_state is None else kernel_state
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

    def _from_parts(self, train_X: Tensor, train_noise: Tensor, L: Tensor) -> GradientGP:
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
            kernel_state=self._kernel_state,
        )
        return gp

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_model(
        cls,
        model: torch.nn.Module,
        *,
        output: int | None = None,
        jitter: float = DEFAULT_JITTER,
        method: DerivativeBackend = "auto",
    ) -> GradientGP:
        r"""Read data, kernel, noise and prior mean of one output off an exact GP.

        Supports BoTorch's ``SingleTaskGP`` (also with several outputs) and other
        ``ExactGP`` models with a ``covar_module``, with a ``GaussianLikelihood`` or
        ``FixedNoiseGaussianLikelihood``, a ``ZeroMean`` or ``ConstantMean``, no input
        transform, no batch dimensions, and either no outcome transform or
        ``Standardize``. Nothing is fitted. For models with an input transform use
        ``output_gradient_gps`` (or ``gradient_posterior`` / ``qGradientInformation``),
        which map gradients back to the original inputs.

        Args:
            model: The GP.
            output: Which output of a multi-output model (``None`` for one output).
            jitter: See ``GradientGP``.
            method: See ``KernelDerivatives``.

        Returns:
            A ``GradientGP`` on the model's training data.
        """
        if getattr(model, "input_transform", None) is not None:
            raise NotImplementedError(
                "GradientGP.from_model reads a model without an input transform: its GP lives "
                "on the transformed inputs. Use output_gradient_gps(model), gradient_posterior "
                "or qGradientInformation, which map gradients to the original inputs by the "
                "chain rule."
            )
        return cls(**exact_gp_parts(model, output), jitter=jitter, method=method)

    @classmethod
    def from_factor(
        cls, train_X: Tensor, factor: Tensor, kernel: Kernel, noise_variance: float, **kwargs: Any
    ) -> GradientGP:
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

    def condition_on(self, X_new: Tensor, noise_variance: float | Tensor | None = None) -> GradientGP:
        r"""A new ``GradientGP`` on ``D ∪ X_new``, reusing the Cholesky factor.

        The factor of the augmented matrix is ``[[L, 0], [Wᵀ, chol(S)]]`` with
        ``W = L⁻¹ k(D, X_new)`` and ``S`` the Schur complement; outcomes are dropped.

        Args:
            X_new: A ``q x d`` tensor.
            noise_variance: Noise of the new points (float or ``q`` tensor); defaults to
                the new-point noise of this model.

        Returns:
            The conditioned ``GradientGP``.

        Raises:
            RuntimeError: The kernel changed since this ``GradientGP`` was factorized.
        """
        if self.kernel_changed():
            raise RuntimeError(
                "The kernel's hyperparameters changed after this GradientGP was factorized: "
                "its Cholesky factor is stale. Build a new GradientGP."
            )
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
    def kernel_changed(self) -> bool:
        r"""Whether the kernel's hyperparameters differ from those the factor was computed with."""
        return self._kernel_state.changed()

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

    def whitened_cross(self, theta: Tensor, jacobian: Tensor | None = None) -> Tensor:
        r"""``V(θ) = L⁻¹ ∇k(θ, D)ᵀ``: a ``batch_shape x N x d`` tensor (``L⁻¹ (Jᵀ∇k)ᵀ`` with ``jacobian``)."""
        return _solve_lower(self.L, _to_input_space(self.cross(theta), jacobian).transpose(-1, -2))

    def gradient_weights(self, theta: Tensor, jacobian: Tensor | None = None) -> Tensor:
        r"""``A = ∇k(θ, D) K⁻¹``, so that ``A y`` is the posterior gradient mean for data ``y``.

        One matrix serves every user: the per-user gradient estimates are ``A Y`` for
        the ``N x n`` matrix ``Y`` of per-user losses (``output_scale`` not applied).

        Args:
            theta: A ``batch_shape x d`` tensor.
            jacobian: Optional ``batch_shape x d x d_x`` input Jacobian (see the class).

        Returns:
            A ``batch_shape x d x N`` tensor (``d_x`` rows with ``jacobian``).
        """
        cross = _to_input_space(self.cross(theta), jacobian)
        if self.num_train == 0:
            return cross
        rhs = cross.transpose(-1, -2)
        N, d = rhs.shape[-2:]
        batch = rhs.shape[:-2]
        sol = torch.cholesky_solve(rhs.movedim(-2, 0).reshape(N, -1), self.L)
        return sol.reshape(N, *batch, d).movedim(0, -2).transpose(-1, -2)

    def _prior(self, theta: Tensor, jacobian: Tensor | None) -> Tensor:
        prior = self.derivatives.prior(theta)
        return prior if jacobian is None else jacobian.transpose(-1, -2) @ prior @ jacobian

    def posterior_covariance(self, theta: Tensor, jacobian: Tensor | None = None) -> Tensor:
        r"""``Σ_D(θ) = ∇k∇ᵀ(θ, θ) − ∇k(θ, D) K⁻¹ k(D, θ)∇ᵀ``, ``batch_shape x d x d``.

        With ``jacobian``: ``JᵀΣ_D(θ)J``, the covariance of the gradient in ``x``.
        """
        V = self.whitened_cross(theta, jacobian)
        cov = self._prior(theta, jacobian) - V.transpose(-1, -2) @ V
        return cov * self.output_scale**2

    def posterior_trace(self, theta: Tensor, jacobian: Tensor | None = None) -> Tensor:
        r"""``tr Σ_D(θ)`` as a ``batch_shape`` tensor (depends on ``D`` and ``θ`` only).

        With ``jacobian``: ``tr JᵀΣ_D(θ)J``.
        """
        V = self.whitened_cross(theta, jacobian)
        if jacobian is None:
            prior_trace = self.derivatives.prior_trace(theta)
        else:
            prior_trace = self._prior(theta, jacobian).diagonal(dim1=-2, dim2=-1).sum(-1)
        trace = prior_trace - V.pow(2).sum((-1, -2))
        return trace * self.output_scale**2

    def posterior(self, theta: Tensor, jacobian: Tensor | None = None) -> GradientPosterior:
        r"""Posterior of ``∇f(θ)`` given ``train_Y``.

        Args:
            theta: A ``batch_shape x d`` tensor.
            jacobian: Optional ``batch_shape x d x d_x`` input Jacobian (see the class).

        Returns:
            ``GradientPosterior`` with a ``batch_shape x d`` mean and a
            ``batch_shape x d x d`` covariance (``d_x`` with ``jacobian``).
        """
        if self.train_Y is None:
            raise ValueError("This GradientGP has no outcomes; pass train_Y.")
        y = (self.train_Y - self.mean_constant).unsqueeze(-1)
        mean = (self.gradient_weights(theta, jacobian) @ y).squeeze(-1) * self.output_scale
        return GradientPosterior(mean=mean, covariance=self.posterior_covariance(theta, jacobian))

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
        self, theta: Tensor, X: Tensor, V: Tensor | None = None, jacobian: Tensor | None = None
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
            V: Optional precomputed ``whitened_cross(theta, jacobian)`` (``N x d``).
            jacobian: Optional ``d x d_x`` input Jacobian at ``θ`` (see the class): the
                reduction of ``tr JᵀΣ(θ)J``, the trace in the original inputs ``x``.

        Returns:
            A ``batch_shape`` tensor of non-negative trace reductions.
        """
        W, S = self._schur(X, self.new_point_noise)
        C = _to_input_space(self.derivatives.cross(theta, X), jacobian)  # batch x d x r
        if self.num_train > 0:
            if V is None:
                V = self.whitened_cross(theta, jacobian)
            C = C - V.transpose(-1, -2) @ W
        if X.shape[-2] == 1:
            # q = 1 (greedy and adaptive batches): a square root and a division; torch's
            # batched Cholesky / triangular solves over many 1 x 1 systems are far slower.
            # S ≥ max(σ², jitter) holds exactly, so the floor only removes round-off.
            M = C.transpose(-1, -2) / S.clamp_min(max(self.new_point_noise, self.jitter)).sqrt()
        else:
            L_S = psd_safe_cholesky(S)
            M = torch.linalg.solve_triangular(L_S, C.transpose(-1, -2), upper=False)
        return M.pow(2).sum((-1, -2)) * self.output_scale**2
