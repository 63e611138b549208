r"""The trace reduction and its gradient in the candidates, in closed form (no autograd graph).

The batch search evaluates ``α(X) = tr Σ_D(θ) − tr Σ_{D ∪ X}(θ)`` and ``∂α/∂X`` hundreds of
times per step on small tensors, so autograd's graph (and GPyTorch's kernel machinery) costs
far more than the arithmetic (issue 33: 85 % of a d = 5 run). For a stationary kernel
``k(x, y) = s κ(r)``, ``r² = Σ_j (x_j − y_j)²/ℓ_j²``, with ``κ`` the RBF or Matérn-5/2
profile (optionally inside a ``ScaleKernel``), both are written out here.

With ``W = L⁻¹ k(D, X)``, ``S = k(X, X) + σ²I − WᵀW``, ``C = ∇k(θ, X) − VᵀW`` and
``B = S⁻¹Cᵀ`` the value is ``α = tr(C S⁻¹ Cᵀ)`` and its differential is
``dα = ⟨2Bᵀ, dC⟩ − ⟨BBᵀ, dS⟩``; the chain rule through ``W`` gives
``∂α/∂k(D, X) = L⁻ᵀ(−V·2Bᵀ + 2W·BBᵀ)``, and each kernel block's derivative in ``X`` is
``s φ(r)(x − y)/ℓ²``-shaped with ``φ = κ'(r)/r``; the cross term ``∇k(θ, x) = s φ(r) u``,
``u = (θ − x)/ℓ²``, has Jacobian ``−s(ψ(r) u uᵀ + φ(r) diag(1/ℓ²))``, ``ψ = φ'(r)/r``.
For RBF ``φ = −e^{−r²/2}``, ``ψ = e^{−r²/2}``; for Matérn-5/2
``φ = −(5/3)(1 + √5 r)e^{−√5 r}``, ``ψ = (25/3)e^{−√5 r}``.

``closed_form_supported(gp)`` says whether a ``GradientGP``'s kernel has these forms;
``trace_reduction_closed_form`` is the value (with its gradient attached by a
``torch.autograd.Function``, so BoTorch's optimizers use it unchanged). It reads the GP's
public inputs and factor only.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from gpytorch.kernels import Kernel, MaternKernel, RBFKernel, ScaleKernel
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

__all__ = ["closed_form_supported", "trace_reduction_closed_form"]

_SQRT5 = math.sqrt(5.0)


def _parts(kernel: Kernel) -> tuple[Kernel, float] | None:
    r"""``(base, s)`` of an RBF or Matérn-5/2 kernel, possibly scaled, without ``active_dims``
    or batch shapes; ``None`` otherwise."""
    scale = 1.0
    if isinstance(kernel, ScaleKernel):
        if kernel.active_dims is not None or kernel.outputscale.numel() != 1:
            return None
        scale, kernel = float(kernel.outputscale.detach()), kernel.base_kernel
    exact = type(kernel) is RBFKernel or (type(kernel) is MaternKernel and kernel.nu == 2.5)
    if not exact or kernel.active_dims is not None or len(kernel.batch_shape) > 0:
        return None
    return kernel, scale


def closed_form_supported(gp: Any) -> bool:
    r"""Whether ``gp`` (a ``GradientGP``) has a kernel with a closed-form value and gradient here."""
    return _parts(gp.kernel) is not None


def _profile(base: Kernel, r2: Tensor, with_psi: bool) -> tuple[Tensor, Tensor, Tensor | None]:
    r"""``κ(r)``, ``φ(r) = κ'(r)/r`` and (if asked) ``ψ(r) = φ'(r)/r`` from ``r²``."""
    if isinstance(base, RBFKernel):
        e = torch.exp(-0.5 * r2)
        return e, -e, e if with_psi else None
    r = r2.sqrt()
    e = torch.exp(-_SQRT5 * r)
    kappa = (1 + _SQRT5 * r + (5.0 / 3.0) * r2) * e
    phi = -(5.0 / 3.0) * (1 + _SQRT5 * r) * e
    return kappa, phi, (25.0 / 3.0) * e if with_psi else None


def _sq_dist(A: Tensor, B: Tensor) -> Tensor:
    r"""``‖a_i − b_j‖²`` (rows of ``A`` and ``B``, already divided by ``ℓ``), clamped at 0."""
    out = A.pow(2).sum(-1, keepdim=True) - 2 * A @ B.transpose(-1, -2) + B.pow(2).sum(-1).unsqueeze(-2)
    return out.clamp_min_(0)


def _cholesky(S: Tensor) -> Tensor:
    L, info = torch.linalg.cholesky_ex(S)
    return psd_safe_cholesky(S) if bool((info > 0).any()) else L


def _evaluate(gp: Any, theta: Tensor, V: Tensor | None, X: Tensor, want_grad: bool) -> tuple[Tensor, Tensor | None]:
    r"""``α`` (``batch``) and, if ``want_grad``, ``∂α/∂X`` (``batch x q x d``) for ``batch x q x d`` ``X``."""
    base, s = _parts(gp.kernel)  # type: ignore[misc]
    ls = base.lengthscale.detach().reshape(-1).to(X)
    inv_ls2 = ls.pow(-2)
    q = X.shape[-2]
    noise = max(gp.new_point_noise, gp.jitter)
    Xs = X / ls
    # the candidates' block S (and W = L⁻¹ k(D, X) when there are training points)
    r2_xx = _sq_dist(Xs, Xs)
    r2_xx.diagonal(dim1=-2, dim2=-1).zero_()
    k_xx, phi_xx, _ = _profile(base, r2_xx, False)
    S = s * k_xx + noise * torch.eye(q, dtype=X.dtype, device=X.device)
    diff = theta.to(X) - X  # batch x q x d
    u = diff * inv_ls2
    _, phi_tx, psi_tx = _profile(base, (diff * u).sum(-1, keepdim=True), want_grad)
    C = s * phi_tx * u  # ∇k(θ, X)ᵀ: batch x q x d
    N = gp.num_train
    if N > 0:
        D = gp.train_X.to(X)
        r2_dx = _sq_dist(D / ls, Xs)  # batch x N x q
        k_dx, phi_dx, _ = _profile(base, r2_dx, False)
        batch = X.shape[:-2]
        rhs = (s * k_dx).movedim(-2, 0).reshape(N, -1)
        W = torch.linalg.solve_triangular(gp.L, rhs, upper=False).reshape(N, *batch, q).movedim(0, -2)
        S = S - W.transpose(-1, -2) @ W
        C = C - W.transpose(-1, -2) @ V  # (Cᵀ of the docstring) batch x q x d
    L_S = _cholesky(S)
    M = torch.linalg.solve_triangular(L_S, C, upper=False)
    scale2 = gp.output_scale**2
    value = M.pow(2).sum((-1, -2)) * scale2
    if not want_grad:
        return value, None
    B = torch.linalg.solve_triangular(L_S.transpose(-1, -2), M, upper=True)  # S⁻¹Cᵀ: batch x q x d
    G_C = 2 * B  # ∂α/∂Cᵀ
    G_S = -(B @ B.transpose(-1, -2))  # ∂α/∂S (symmetric)
    # cross term ∇k(θ, x_j): Jacobianᵀ g = −s(ψ u (u·g) + φ g/ℓ²)
    grad = -s * (psi_tx * u * (u * G_C).sum(-1, keepdim=True) + phi_tx * G_C * inv_ls2)
    # k(X, X): ∂k(x_a, x_b)/∂x_a = s φ (x_a − x_b)/ℓ², counted for both arguments of the symmetric G_S
    P = 2 * s * G_S * phi_xx  # batch x q x q
    grad = grad + (P.sum(-1, keepdim=True) * X - P @ X) * inv_ls2
    if N > 0:
        G_W = -(V @ G_C.transpose(-1, -2)) - 2 * (W @ G_S)  # batch x N x q
        rhs = G_W.movedim(-2, 0).reshape(N, -1)
        G_K = (
            torch.linalg.solve_triangular(gp.L.transpose(-1, -2), rhs, upper=True).reshape(N, *batch, q).movedim(0, -2)
        )
        # k(D, X): ∂k(d_i, x_j)/∂x_j = s φ (x_j − d_i)/ℓ²
        Q = s * G_K * phi_dx  # batch x N x q
        grad = grad + (Q.sum(-2).unsqueeze(-1) * X - Q.transpose(-1, -2) @ D) * inv_ls2
    return value, grad * scale2


class _TraceReduction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, X: Tensor, gp: Any, theta: Tensor, V: Tensor | None) -> Tensor:
        value, grad = _evaluate(gp, theta, V, X.detach(), ctx.needs_input_grad[0])
        ctx.save_for_backward(grad if grad is not None else X.new_empty(0))
        return value

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, None, None, None]:
        (grad,) = ctx.saved_tensors
        return grad_output.reshape(*grad_output.shape, 1, 1) * grad, None, None, None


def trace_reduction_closed_form(gp: Any, theta: Tensor, X: Tensor, V: Tensor | None = None) -> Tensor:
    r"""``gp.trace_reduction(theta, X, V)`` for a supported kernel, with ``∂/∂X`` in closed form.

    Args:
        gp: A ``GradientGP`` whose kernel ``closed_form_supported`` accepts.
        theta: The ``d`` iterate ``θ``.
        X: A ``batch_shape x q x d`` tensor of candidates (may require grad).
        V: ``gp.whitened_cross(theta)`` (``N x d``), computed if not given.

    Returns:
        A ``batch_shape`` tensor; its gradient in ``X`` (if ``X`` requires grad) is the closed
        form, not autograd's. A second derivative is not available.
    """
    if _parts(gp.kernel) is None:
        raise ValueError(f"No closed form for the kernel {type(gp.kernel).__name__} (RBF or Matérn-5/2 only).")
    theta = theta.reshape(-1)
    if V is None and gp.num_train > 0:
        with torch.no_grad():
            V = gp.whitened_cross(theta)
    if X.dim() == 2:
        return _TraceReduction.apply(X.unsqueeze(0), gp, theta, V).squeeze(0)
    return _TraceReduction.apply(X, gp, theta, V)
