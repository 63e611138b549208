r"""Covariances between a GP's gradient and its values, for a fixed kernel.

Backends: closed forms and GPyTorch's derivative kernels (RBF, Matérn-5/2, polynomial,
optionally inside a ``ScaleKernel``), and autograd for any twice-differentiable kernel.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from gpytorch.kernels import (
    Kernel,
    Matern52KernelGrad,
    MaternKernel,
    PolynomialKernel,
    PolynomialKernelGrad,
    RBFKernel,
    RBFKernelGrad,
    ScaleKernel,
)
from torch import Tensor

DerivativeBackend = Literal["auto", "closed_form", "derivative_kernel", "autograd"]


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


class KernelDerivatives:
    r"""Gradient-value and gradient-gradient covariances of a GP prior with kernel ``k``.

    For the GP ``f ~ GP(0, k)``:

    - ``cross(theta, X)[..., j, i] = Cov(d f(theta) / d theta_j, f(x_i)) = d k(theta, x_i) / d theta_j``
      (the matrix written ``∇k(θ, X)`` in the design notes);
    - ``prior(theta) = Cov(∇f(theta), ∇f(theta)) = ∇k∇ᵀ(θ, θ)``.

    Args:
        kernel: A GPyTorch kernel with fixed hyperparameters, on ``d``-dim inputs.
        method: ``"derivative_kernel"`` uses GPyTorch's derivative kernels (RBF,
            Matérn-5/2 and polynomial, optionally inside a ``ScaleKernel``), which form
            the full ``(d+1) x (d+1)`` joint block per pair of points;
            ``"closed_form"`` takes the gradient/value block from hand-written
            formulas for the same kernels (``O(d)`` per pair instead of ``O(d²)``) and
            the gradient/gradient block from the derivative kernel; ``"autograd"``
            differentiates ``kernel`` itself and works for any twice-differentiable
            kernel; ``"auto"`` picks the first of closed_form / autograd that applies.
    """

    def __init__(self, kernel: Kernel, method: DerivativeBackend = "auto") -> None:
        if method not in ("auto", "closed_form", "derivative_kernel", "autograd"):
            raise ValueError(f"Unknown method {method!r}.")
        self.kernel = kernel
        base, _ = _split_scale(kernel)
        has_twin = derivative_kernel_for(base) is not None
        if method in ("closed_form", "derivative_kernel") and not has_twin:
            raise ValueError(
                f"No GPyTorch derivative kernel for {type(base).__name__}; "
                "use method='autograd'."
            )
        if method == "auto":
            method = "closed_form" if has_twin else "autograd"
        self.method = method
        if self.method == "autograd" and isinstance(base, MaternKernel):
            # GPyTorch computes Matérn distances as sqrt(clamp(r², 1e-30)), whose autograd
            # second derivative at r = 0 is wrong; Matérn-5/2 has a derivative kernel.
            raise ValueError(
                "The autograd backend cannot differentiate GPyTorch's Matérn kernel twice "
                "at coincident points; use nu=2.5 with method='derivative_kernel'."
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
        if self.method in ("closed_form", "derivative_kernel"):
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
            rows = [
                torch.autograd.grad(grad_a[..., j].sum(), b, retain_graph=True)[0]
                for j in range(d)
            ]
        return torch.stack(rows, dim=-2).detach()
