r"""Covariances between a GP's gradient and its values, for a fixed kernel.

Backends: closed forms (RBF, Matérn-3/2 and 5/2, polynomial, and scaled, additive and
product compositions of them, with ``active_dims``), GPyTorch's derivative kernels (RBF,
Matérn-5/2, polynomial, optionally inside a ``ScaleKernel``), and autograd for any other
twice-differentiable kernel. Matérn-1/2 is refused: its sample paths are not
differentiable.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from gpytorch.kernels import (
    AdditiveKernel,
    Kernel,
    Matern52KernelGrad,
    MaternKernel,
    PolynomialKernel,
    PolynomialKernelGrad,
    ProductKernel,
    RBFKernel,
    RBFKernelGrad,
    ScaleKernel,
)
from torch import Tensor

__all__ = ["DerivativeBackend", "KernelDerivatives", "check_differentiable", "derivative_kernel_for"]

DerivativeBackend = Literal["auto", "closed_form", "derivative_kernel", "autograd"]

# Cov(∂_j f(θ), ∂_l f(θ)) = c δ_jl / ℓ_j² for a unit-variance stationary kernel k(r) = 1 − c r²/2 + …
_CURVATURE = {"rbf": 1.0, 1.5: 3.0, 2.5: 5.0 / 3.0}


def _split_scale(kernel: Kernel) -> tuple[Kernel, Tensor | None]:
    """Return ``(base_kernel, outputscale)`` for a possibly scaled kernel."""
    if isinstance(kernel, ScaleKernel):
        return kernel.base_kernel, kernel.outputscale
    return kernel, None


def derivative_kernel_for(kernel: Kernel) -> Kernel | None:
    r"""Build GPyTorch's derivative-kernel twin of ``kernel``, sharing its hyperparameters.

    The twin returns the joint covariance of values and gradients; its parameters are
    copies (not views) of the current values of ``kernel``'s, so build a fresh twin
    after changing the kernel. ``ScaleKernel`` wrappers are handled by the caller.

    Args:
        kernel: An unscaled ``RBFKernel``, ``MaternKernel(nu=2.5)`` or ``PolynomialKernel``.

    Returns:
        The matching ``RBFKernelGrad`` / ``Matern52KernelGrad`` / ``PolynomialKernelGrad``,
        or ``None`` if there is none (use the autograd backend then).
    """
    if kernel.active_dims is not None or len(kernel.batch_shape) > 0:
        return None
    if type(kernel) is RBFKernel:
        twin = RBFKernelGrad(ard_num_dims=kernel.ard_num_dims)
    elif type(kernel) is MaternKernel and kernel.nu == 2.5:
        twin = Matern52KernelGrad(ard_num_dims=kernel.ard_num_dims)
    elif type(kernel) is PolynomialKernel:
        twin = PolynomialKernelGrad(power=kernel.power)
        twin = twin.to(kernel.offset)
        twin.offset = kernel.offset.detach()
        return twin.requires_grad_(False)
    else:
        return None
    twin = twin.to(kernel.lengthscale)
    twin.lengthscale = kernel.lengthscale.detach()
    return twin.requires_grad_(False)


def _nodes(kernel: Kernel):
    """``kernel`` and every kernel inside it (``ScaleKernel`` bases, sums and products)."""
    yield kernel
    if type(kernel) is ScaleKernel:
        yield from _nodes(kernel.base_kernel)
    elif type(kernel) in (AdditiveKernel, ProductKernel):
        for k in kernel.kernels:
            yield from _nodes(k)


def _has_closed_form(kernel: Kernel) -> bool:
    """Whether every node of ``kernel`` is a composite or a leaf with a hand-written form."""
    for k in _nodes(kernel):
        if type(k) in (ScaleKernel, AdditiveKernel, ProductKernel, RBFKernel, PolynomialKernel):
            continue
        if type(k) is MaternKernel and k.nu in (1.5, 2.5):
            continue
        return False
    return True


def check_differentiable(kernel: Kernel) -> None:
    r"""Refuse kernels whose gradient covariance is undefined or that this module cannot read.

    Raises:
        ValueError: ``kernel`` contains a Matérn-1/2 kernel (``nu=0.5``, the exponential
            kernel): its sample paths are continuous but nowhere differentiable, so
            ``∇f(θ)`` does not exist and ``Cov(∇f(θ))`` — the GIBO criterion — is
            undefined (``k`` has a kink at ``r = 0``, ``∇k∇ᵀ(θ, θ)`` is infinite).
            Or a kernel in it has a ``batch_shape`` (one kernel per output or batch
            element: read the outputs one at a time).
    """
    for k in _nodes(kernel):
        if isinstance(k, MaternKernel) and k.nu == 0.5:
            raise ValueError(
                "MaternKernel(nu=0.5) is refused: its sample paths are not differentiable, "
                "so the gradient ∇f(θ) does not exist and its posterior covariance (the GIBO "
                "criterion) is undefined (the kernel has a kink at r = 0, the prior gradient "
                "variance is infinite). Use nu=1.5, nu=2.5 or an RBF kernel."
            )
        if len(k.batch_shape) > 0:
            raise ValueError(
                f"{type(k).__name__} has batch_shape {tuple(k.batch_shape)}: KernelDerivatives "
                "takes one kernel without batch dimensions (index the batch, e.g. kernel[i])."
            )


def _embedding(kernel: Kernel, d: int, like: Tensor) -> Tensor | None:
    """``E`` (``d x d'``) with ``x[..., active_dims] = x @ E``, or ``None`` without active dims."""
    if kernel.active_dims is None:
        return None
    return torch.eye(d, dtype=like.dtype, device=like.device)[:, kernel.active_dims.to(like.device)]


def _tree_cross(kernel: Kernel, theta: Tensor, X: Tensor, sliced: bool = False) -> tuple[Tensor, Tensor]:
    r"""``k(θ, X)`` (``batch x n``) and ``∂k(θ, x_i)/∂θ`` (``batch x n x d``) by closed forms.

    ``theta`` is ``batch x d``, ``X`` is ``batch x n x d`` (broadcastable). Each node first
    selects its ``active_dims`` and maps its gradient back to ``d``, as GPyTorch's
    ``__call__`` does: sums and products call their parts, but a ``ScaleKernel`` (which
    takes over its base kernel's ``active_dims``) calls its base's ``forward``, so the
    base is not sliced again (``sliced=True``).
    """
    E = None if sliced else _embedding(kernel, theta.shape[-1], theta)
    if E is not None:
        theta, X = theta @ E, X @ E
    kind = type(kernel)
    if kind is ScaleKernel:
        value, grad = _tree_cross(kernel.base_kernel, theta, X, sliced=True)
        scale = kernel.outputscale.reshape(())
        value, grad = scale * value, scale * grad
    elif kind is AdditiveKernel:
        parts = [_tree_cross(k, theta, X) for k in kernel.kernels]
        zero = theta.new_zeros(())  # sum's start, as the int 0 (same dtype and device as the parts)
        value = sum((v for v, _ in parts), zero)
        grad = sum((g for _, g in parts), zero)
    elif kind is ProductKernel:
        value, grad = _tree_cross(kernel.kernels[0], theta, X)
        for k in kernel.kernels[1:]:  # product rule, one factor at a time
            v, g = _tree_cross(k, theta, X)
            value, grad = value * v, grad * v.unsqueeze(-1) + value.unsqueeze(-1) * g
    elif kind is PolynomialKernel:
        # k = (θᵀx + c)^p,  ∂k/∂θ = p (θᵀx + c)^(p−1) x
        inner = (theta.unsqueeze(-2) * X).sum(-1) + kernel.offset.reshape(())
        value = inner.pow(kernel.power)
        grad = (kernel.power * inner.pow(kernel.power - 1)).unsqueeze(-1) * X
    else:
        # stationary: k(r) with r² = Σ_j (θ_j − x_j)² / ℓ_j², ∂k/∂θ_j = −q(r) (θ_j − x_j) / ℓ_j²
        diff = theta.unsqueeze(-2) - X
        scaled = diff / kernel.lengthscale.reshape(-1).pow(2)
        r2 = (diff * scaled).sum(-1)
        if kind is RBFKernel:
            value = torch.exp(-0.5 * r2)
            q = value
        else:  # Matérn; the clamp gives the correct (zero) slope at r = 0
            r = r2.clamp_min(1e-30).sqrt()
            if kernel.nu == 1.5:
                e = torch.exp(-math.sqrt(3.0) * r)
                value, q = (1 + math.sqrt(3.0) * r) * e, 3.0 * e
            else:
                e = torch.exp(-math.sqrt(5.0) * r)
                value = (1 + math.sqrt(5.0) * r + (5.0 / 3.0) * r2) * e
                q = (5.0 / 3.0) * (1 + math.sqrt(5.0) * r) * e
        grad = -q.unsqueeze(-1) * scaled
    if E is not None:
        grad = grad @ E.transpose(-1, -2)
    return value, grad


def _tree_at_theta(kernel: Kernel, theta: Tensor, sliced: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    r"""At ``a = b = θ``: ``k(θ, θ)``, ``g = ∂k(a, b)/∂a`` and ``H = ∂²k(a, b)/∂a∂bᵀ``.

    Shapes ``batch``, ``batch x d`` and ``batch x d x d`` for a ``batch x d`` ``theta``.
    ``H`` is the prior gradient covariance; ``g`` (zero for stationary kernels) enters the
    product rule: ``H(k₁k₂) = H₁k₂ + g₁g₂ᵀ + g₂g₁ᵀ + k₁H₂`` (``∂k/∂b = g`` by symmetry).
    ``active_dims`` as in ``_tree_cross``.
    """
    E = None if sliced else _embedding(kernel, theta.shape[-1], theta)
    if E is not None:
        theta = theta @ E
    kind = type(kernel)
    if kind is ScaleKernel:
        scale = kernel.outputscale.reshape(())
        value, g, H = (scale * t for t in _tree_at_theta(kernel.base_kernel, theta, sliced=True))
    elif kind is AdditiveKernel:
        parts = [_tree_at_theta(k, theta) for k in kernel.kernels]
        value, g, H = (sum(p[i] for p in parts) for i in range(3))
    elif kind is ProductKernel:
        value, g, H = _tree_at_theta(kernel.kernels[0], theta)
        for k in kernel.kernels[1:]:
            v2, g2, H2 = _tree_at_theta(k, theta)
            outer = g.unsqueeze(-1) * g2.unsqueeze(-2)
            v, v2_ = value[..., None, None], v2[..., None, None]
            H = H * v2_ + outer + outer.transpose(-1, -2) + v * H2
            g = g * v2.unsqueeze(-1) + value.unsqueeze(-1) * g2
            value = value * v2
    elif kind is PolynomialKernel:
        # s = θᵀθ + c: k = s^p, g = p s^(p−1) θ, H = p s^(p−1) I + p(p−1) s^(p−2) θθᵀ
        p = kernel.power
        s = (theta * theta).sum(-1) + kernel.offset.reshape(())
        value = s.pow(p)
        g = (p * s.pow(p - 1)).unsqueeze(-1) * theta
        eye = torch.eye(theta.shape[-1], dtype=theta.dtype, device=theta.device)
        H = (p * s.pow(p - 1))[..., None, None] * eye
        if p >= 2:
            H = H + (p * (p - 1) * s.pow(p - 2))[..., None, None] * (theta.unsqueeze(-1) * theta.unsqueeze(-2))
    else:
        c = _CURVATURE["rbf" if kind is RBFKernel else kernel.nu]
        value = theta.new_ones(theta.shape[:-1])
        g = torch.zeros_like(theta)
        inv_ls2 = kernel.lengthscale.reshape(-1).pow(-2).expand(theta.shape[-1])
        H = torch.diag_embed(c * inv_ls2).expand(*theta.shape[:-1], theta.shape[-1], theta.shape[-1])
    if E is not None:
        g = g @ E.transpose(-1, -2)
        H = E @ H @ E.transpose(-1, -2)
    return value, g, H


class KernelDerivatives:
    r"""Gradient-value and gradient-gradient covariances of a GP prior with kernel ``k``.

    For the GP ``f ~ GP(0, k)``:

    - ``cross(theta, X)[..., j, i] = Cov(d f(theta) / d theta_j, f(x_i)) = d k(theta, x_i) / d theta_j``
      (the matrix written ``∇k(θ, X)`` in the design notes);
    - ``prior(theta) = Cov(∇f(theta), ∇f(theta)) = ∇k∇ᵀ(θ, θ)``.

    Args:
        kernel: A GPyTorch kernel with fixed hyperparameters, on ``d``-dim inputs, without
            batch dimensions. Kernels whose sample paths are not differentiable
            (Matérn-1/2) are refused (see ``check_differentiable``).
        method: ``"derivative_kernel"`` uses GPyTorch's derivative kernels (RBF,
            Matérn-5/2 and polynomial, optionally inside a ``ScaleKernel``), which form
            the full ``(d+1) x (d+1)`` joint block per pair of points;
            ``"closed_form"`` uses hand-written formulas for both blocks: for those same
            kernels (the gradient/value block in ``O(d)`` per pair instead of ``O(d²)``)
            and for every other kernel built from RBF, Matérn-3/2 and 5/2 and polynomial
            leaves with ``ScaleKernel``, sums, products and ``active_dims``, by the sum and
            product rules; ``"autograd"`` differentiates ``kernel`` itself and
            works for any twice-differentiable kernel without a Matérn part (GPyTorch's
            Matérn distance has a wrong second derivative at ``r = 0``); ``"auto"`` picks
            closed_form where it applies, else autograd.
    """

    def __init__(self, kernel: Kernel, method: DerivativeBackend = "auto") -> None:
        if method not in ("auto", "closed_form", "derivative_kernel", "autograd"):
            raise ValueError(f"Unknown method {method!r}.")
        check_differentiable(kernel)
        self.kernel = kernel
        base, _ = _split_scale(kernel)
        # a ScaleKernel may carry active_dims of its own, which the twin path would ignore
        has_twin = kernel.active_dims is None and derivative_kernel_for(base) is not None
        closed = has_twin or _has_closed_form(kernel)
        has_matern = any(isinstance(k, MaternKernel) for k in _nodes(kernel))
        if method == "derivative_kernel" and not has_twin:
            hint = "method='closed_form'" if closed else "method='autograd'"
            raise ValueError(f"No GPyTorch derivative kernel for {type(base).__name__}; use {hint}.")
        if method == "closed_form" and not closed:
            raise ValueError(
                f"No closed form for {type(kernel).__name__} (closed forms: RBF, Matérn-3/2 "
                "and 5/2, polynomial, and scaled, additive and product compositions of "
                "them); use method='autograd'."
            )
        if method == "auto":
            method = "closed_form" if closed else "autograd"
        self.method = method
        # "closed_form" on a kernel without a GPyTorch twin: both blocks from the tree
        self._tree = method == "closed_form" and not has_twin
        if self.method == "autograd" and has_matern:
            # GPyTorch computes Matérn distances as sqrt(clamp(r², 1e-30)), whose autograd
            # second derivative at r = 0 is wrong.
            raise ValueError(
                "The autograd backend cannot differentiate GPyTorch's Matérn kernel twice "
                "at coincident points; use method='closed_form' (Matérn-3/2 and 5/2, alone "
                "or in scaled, additive and product compositions with RBF and polynomial "
                "kernels)."
            )

    # ------------------------------------------------------------------ public API
    def cross(self, theta: Tensor, X: Tensor) -> Tensor:
        r"""Covariance between ``∇f(theta)`` and ``f(X)``.

        Args:
            theta: A ``batch_shape x d`` tensor of points.
            X: A ``batch_shape x n x d`` tensor (broadcastable against ``theta``).

        Returns:
            A ``batch_shape x d x n`` tensor ``∇k(θ, X)``.
        """
        if X.shape[-2] == 0:
            shape = torch.broadcast_shapes(theta.shape[:-1], X.shape[:-2])
            return X.new_zeros(*shape, X.shape[-1], 0)
        if self._tree:
            return _tree_cross(self.kernel, theta, X)[1].transpose(-1, -2)
        if self.method == "closed_form":
            return self._cross_closed(theta, X)
        if self.method == "derivative_kernel":
            return self._cross_twin(theta, X)
        return self._cross_autograd(theta, X)

    def prior(self, theta: Tensor) -> Tensor:
        r"""Prior covariance of the gradient at ``theta``.

        Args:
            theta: A ``batch_shape x d`` tensor.

        Returns:
            A ``batch_shape x d x d`` tensor ``∇k∇ᵀ(θ, θ)``.
        """
        if self.method == "closed_form":  # the written-out block (a new twin per call cost ms: issue 33)
            return _tree_at_theta(self.kernel, theta)[2]
        if self.method == "derivative_kernel":
            return self._prior_twin(theta)
        return self._prior_autograd(theta)

    def prior_trace(self, theta: Tensor) -> Tensor:
        r"""``tr ∇k∇ᵀ(θ, θ)`` as a ``batch_shape`` tensor."""
        return self.prior(theta).diagonal(dim1=-2, dim2=-1).sum(-1)

    # ------------------------------------------------------------------ backends
    def _twin(self) -> tuple[Kernel, Tensor | None]:
        base, scale = _split_scale(self.kernel)
        return derivative_kernel_for(base), scale

    def _cross_twin(self, theta: Tensor, X: Tensor) -> Tensor:
        twin, scale = self._twin()
        d = theta.shape[-1]
        theta_ = theta.unsqueeze(-2)
        batch = torch.broadcast_shapes(theta_.shape[:-2], X.shape[:-2])
        theta_ = theta_.expand(*batch, 1, d)
        X = X.expand(*batch, *X.shape[-2:])
        # joint covariance laid out per point as [f, df/dx_1, ..., df/dx_d]
        joint = twin(theta_, X).to_dense()  # batch x (d+1) x n(d+1)
        out = joint[..., 1:, :: d + 1]
        return out if scale is None else scale * out

    def _cross_closed(self, theta: Tensor, X: Tensor) -> Tensor:
        # d k(θ, x) / dθ_j for the kernels that have a GPyTorch derivative twin:
        #   RBF:        −k(θ, x) (θ_j − x_j) / ℓ_j²
        #   Matérn-5/2: −(5/3)(1 + √5 r) exp(−√5 r) (θ_j − x_j) / ℓ_j²   (r: scaled distance)
        #   polynomial: p (θᵀx + c)^(p−1) x_j
        base, scale = _split_scale(self.kernel)
        theta_ = theta.unsqueeze(-2)  # batch x 1 x d
        if isinstance(base, PolynomialKernel):
            inner = (theta_ * X).sum(-1, keepdim=True) + base.offset.reshape(())
            out = base.power * inner.pow(base.power - 1) * X
        else:
            ls2 = base.lengthscale.reshape(-1).pow(2)
            diff = theta_ - X  # batch x n x d
            scaled = diff / ls2
            r2 = (diff * scaled).sum(-1, keepdim=True)
            if isinstance(base, RBFKernel):
                out = -torch.exp(-0.5 * r2) * scaled
            else:  # Matérn-5/2
                r = r2.clamp_min(1e-30).sqrt()  # zero gradient at r = 0, the correct limit
                out = -(5.0 / 3.0) * (1 + math.sqrt(5.0) * r) * torch.exp(-math.sqrt(5.0) * r) * scaled
        out = out.transpose(-1, -2)
        return out if scale is None else scale * out

    def _prior_twin(self, theta: Tensor) -> Tensor:
        twin, scale = self._twin()
        theta_ = theta.unsqueeze(-2)
        joint = twin(theta_, theta_).to_dense()  # batch x (d+1) x (d+1)
        out = joint[..., 1:, 1:]
        return out if scale is None else scale * out

    def _cross_autograd(self, theta: Tensor, X: Tensor) -> Tensor:
        # One copy of theta per column of X: the gradient of the sum w.r.t. copy i is
        # d k(theta, x_i) / d theta, so all columns come out of a single backward pass.
        batch = torch.broadcast_shapes(theta.shape[:-1], X.shape[:-2])
        n, d = X.shape[-2:]
        keep_graph = torch.is_grad_enabled() and X.requires_grad
        with torch.enable_grad():
            theta_rep = theta.unsqueeze(-2).expand(*batch, n, d).detach().requires_grad_(True)
            X = X.expand(*batch, n, d)
            values = self.kernel(theta_rep, X, diag=True)
            (grad,) = torch.autograd.grad(values.sum(), theta_rep, create_graph=keep_graph)
        return grad.transpose(-1, -2)

    def _prior_autograd(self, theta: Tensor) -> Tensor:
        d = theta.shape[-1]
        with torch.enable_grad():
            a = theta.detach().clone().requires_grad_(True)
            b = theta.detach().clone().requires_grad_(True)
            # the full (1 x 1) kernel matrix, not diag=True: GPyTorch short-cuts the
            # diagonal of equal inputs to a constant, which would cut the graph
            value = self.kernel(a.unsqueeze(-2), b.unsqueeze(-2)).to_dense().sum()
            (grad_a,) = torch.autograd.grad(value, a, create_graph=True)
            # mixed second derivative d^2 k(a, b) / da_j db_l, one row per input dimension
            rows = [torch.autograd.grad(grad_a[..., j].sum(), b, retain_graph=True)[0] for j in range(d)]
        return torch.stack(rows, dim=-2).detach()
