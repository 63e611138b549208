r"""Gradient GPs read off BoTorch and GPyTorch models, with the chain rule through input transforms.

``output_gradient_gps`` splits a model into its outputs (model lists flattened, the outputs
of a multi-output ``SingleTaskGP`` apart), reads each exact GP's training data, kernel,
noise, prior mean and outcome scale (``exact.exact_gp_parts``, also behind
``GradientGP.from_model``), and keeps the model's input transform: its Jacobian at θ maps
gradients back to the original inputs (``OutputGradientGP``). ``gradient_posterior`` is
the shortcut for a model with one output. Models and transforms with no single gradient
posterior are refused with an error that names the alternative.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_dp.gradient_gp.core import DEFAULT_JITTER, GradientGP, GradientPosterior
from botorch_dp.gradient_gp.exact import BATCH_HINT, exact_gp_parts
from botorch_dp.kernel_derivatives import DerivativeBackend

__all__ = ["OutputGradientGP", "gradient_posterior", "output_gradient_gps"]


def _read_exact_gp(
    model: torch.nn.Module, output: int | None, *, jitter: float, method: DerivativeBackend
) -> GradientGP:
    r"""``GradientGP`` of one output of an exact GP, on its training inputs as stored (in eval
    mode BoTorch stores the transformed inputs, so it lives in the model's input space ``z``)."""
    return GradientGP(**exact_gp_parts(model, output), jitter=jitter, method=method)


def _split_outputs(model: torch.nn.Module) -> list[tuple[torch.nn.Module, int | None]]:
    r"""``(single-output model, output index)`` pairs: model lists flattened, outputs apart."""
    from botorch.models.gpytorch import MultiTaskGPyTorchModel
    from botorch.models.model import ModelList

    if isinstance(model, ModelList):
        return [pair for sub in model.models for pair in _split_outputs(sub)]
    if isinstance(model, MultiTaskGPyTorchModel):
        raise NotImplementedError(
            f"{type(model).__name__} correlates its tasks (the task index is an input), so its "
            "gradient covariance does not split into one trace per output. Use a ModelListGP "
            "of single-task GPs or a multi-output SingleTaskGP (independent outputs)."
        )
    batch_shape = getattr(model, "_input_batch_shape", None)
    if batch_shape is None:
        train_inputs = getattr(model, "train_inputs", None)
        batch_shape = train_inputs[0].shape[:-2] if train_inputs else torch.Size()
    if len(batch_shape) > 0:
        raise NotImplementedError(
            f"{type(model).__name__} has batch_shape {tuple(batch_shape)}: a batch of models has "
            "no single gradient posterior at θ. " + BATCH_HINT
        )
    m = getattr(model, "num_outputs", 1)
    return [(model, None)] if m == 1 else [(model, i) for i in range(m)]


def _transforms(transform: torch.nn.Module) -> list[torch.nn.Module]:
    from botorch.models.transforms.input import ChainedInputTransform

    if isinstance(transform, ChainedInputTransform):
        return [t for sub in transform.values() for t in _transforms(sub)]
    return [transform]


def _check_input_transform(transform: torch.nn.Module) -> None:
    r"""Refuse input transforms under which ``f(x) = g(T(x))`` has no gradient by the chain rule."""
    from botorch.models.transforms.input import (
        BatchBroadcastedInputTransform,
        NumericToCategoricalEncoding,
        OneHotToNumeric,
        Round,
    )

    for t in _transforms(transform):
        name = type(t).__name__
        if isinstance(t, BatchBroadcastedInputTransform):
            raise NotImplementedError(f"{name} belongs to a batched model. " + BATCH_HINT)
        if getattr(t, "is_one_to_many", False):
            raise NotImplementedError(
                f"The input transform {name} maps each point to several points, so the model "
                "is not a GP of one transformed point z = T(x) and the chain rule does not apply."
            )
        if not (t.transform_on_train and t.transform_on_eval):
            raise NotImplementedError(
                f"The input transform {name} applies only to training or only to test inputs "
                f"(transform_on_train={t.transform_on_train}, transform_on_eval="
                f"{t.transform_on_eval}): the training data and θ would live in different spaces."
            )
        if isinstance(t, (Round, OneHotToNumeric, NumericToCategoricalEncoding)):
            raise NotImplementedError(
                f"The input transform {name} is not differentiable: the objective is piecewise "
                "constant in the original inputs and has no gradient to learn."
            )


def _input_jacobian(transform: torch.nn.Module, theta: Tensor) -> tuple[Tensor, Tensor]:
    r"""``z = T(θ)`` and ``J = ∂z/∂θ`` for a ``batch x d`` ``theta`` (``batch x d_z``, ``batch x d_z x d``).

    ``T`` acts point by point (checked), so the row ``j`` of every point's Jacobian comes
    from one backward pass of ``Σ_points z_j``.
    """
    batch, d = theta.shape[:-1], theta.shape[-1]
    with torch.enable_grad():
        x = theta.detach().reshape(-1, d).requires_grad_(True)
        z = transform(x)
        if z.dim() != 2 or z.shape[0] != x.shape[0]:
            raise NotImplementedError(
                f"The input transform maps {tuple(x.shape)} inputs to shape {tuple(z.shape)}; "
                "the chain rule needs a map of one point to one point."
            )
        rows = [
            torch.autograd.grad(z[:, j].sum(), x, retain_graph=True, allow_unused=True)[0] for j in range(z.shape[-1])
        ]
    rows = [torch.zeros_like(x) if r is None else r for r in rows]
    J = torch.stack(rows, dim=-2)
    if not torch.isfinite(J).all():
        raise ValueError("The input transform's Jacobian at theta is not finite.")
    return z.detach().reshape(*batch, -1), J.reshape(*batch, *J.shape[-2:])


@dataclass
class OutputGradientGP:
    r"""The ``GradientGP`` of one output of a model and the map of the model's inputs.

    The GP lives on the model's inputs ``z = T(x)`` (``T`` its input transform, or the
    identity); gradients in the original inputs ``x`` follow by the chain rule,
    ``∇_x f = Jᵀ ∇_z f`` with ``J = ∂z/∂x`` (diagonal for affine transforms such as
    ``Normalize``).

    Attributes:
        gp: The ``GradientGP`` in ``z``.
        input_transform: The model's input transform ``T`` (in eval mode), or ``None``.
    """

    gp: GradientGP
    input_transform: torch.nn.Module | None = None

    def inputs(self, X: Tensor) -> Tensor:
        r"""``T(X)`` for a ``batch_shape x q x d`` tensor (differentiable in ``X``)."""
        return X if self.input_transform is None else self.input_transform(X)

    def at(self, theta: Tensor) -> tuple[Tensor, Tensor | None]:
        r"""``T(θ)`` and ``J = ∂T/∂x`` at ``θ`` (``None`` without a transform).

        Args:
            theta: A ``batch_shape x d`` tensor.

        Returns:
            A ``batch_shape x d_z`` tensor and a ``batch_shape x d_z x d`` tensor or ``None``.
        """
        if self.input_transform is None:
            return theta, None
        return _input_jacobian(self.input_transform, theta.to(self.gp.train_X))

    def posterior(self, theta: Tensor) -> GradientPosterior:
        r"""Posterior of ``∇_x f(θ)`` in the original inputs (needs the outcomes)."""
        theta_z, J = self.at(theta)
        return self.gp.posterior(theta_z, jacobian=J)

    def posterior_trace(self, theta: Tensor) -> Tensor:
        r"""``tr Cov(∇_x f(θ) | D)`` as a ``batch_shape`` tensor."""
        theta_z, J = self.at(theta)
        return self.gp.posterior_trace(theta_z, jacobian=J)


def output_gradient_gps(
    model: torch.nn.Module, *, jitter: float = DEFAULT_JITTER, method: DerivativeBackend = "auto"
) -> list[OutputGradientGP]:
    r"""One ``OutputGradientGP`` per output of a model, in output order.

    Reads ``GradientGP``s as they are, single-output exact GPs (see
    ``GradientGP.from_model``), multi-output ``SingleTaskGP``s (each output its own GP)
    and ``ModelListGP``s (flattened). Input transforms are kept for the chain rule when
    they map one point to one differentiable point on training and test inputs alike
    (``Normalize`` with fixed or learned bounds, ``InputStandardize``, ``Warp``,
    ``Log10``, chains of them). The model is put in eval mode (as BoTorch's
    ``posterior`` does), where it holds its transformed training inputs.

    Refused with an error that names the alternative: batched models (a batch of models
    has no single gradient posterior: build one per batch element), multi-task models
    (correlated outputs), approximate GPs, non-differentiable or one-to-many transforms,
    and kernels with non-differentiable sample paths (Matérn-1/2).

    Args:
        model: A ``GradientGP`` or a BoTorch / GPyTorch exact GP with fixed hyperparameters.
        jitter: See ``GradientGP``.
        method: See ``KernelDerivatives``.

    Returns:
        A list with one entry per output.
    """
    if isinstance(model, GradientGP):
        return [OutputGradientGP(model)]
    model.eval()
    parts = []
    for sub, output in _split_outputs(model):
        transform = getattr(sub, "input_transform", None)
        if transform is not None:
            _check_input_transform(transform)
        gp = _read_exact_gp(sub, output, jitter=jitter, method=method)
        parts.append(OutputGradientGP(gp, transform))
    return parts


def gradient_posterior(
    model: torch.nn.Module, theta: Tensor, *, jitter: float = DEFAULT_JITTER, method: DerivativeBackend = "auto"
) -> GradientPosterior:
    r"""Posterior mean and covariance of ``∇f(θ)`` for a single-output exact GP.

    Nothing is fitted: the model's kernel hyperparameters and likelihood noise ``σ²``
    are used as they are (see ``output_gradient_gps`` for the supported models). With an
    input transform the gradient is taken in the original inputs (chain rule).

    Args:
        model: E.g. a ``SingleTaskGP`` with fixed hyperparameters.
        theta: A ``d`` or ``batch_shape x d`` tensor.
        jitter: Diagonal floor of the kernel matrix.
        method: Kernel-derivative backend (see ``KernelDerivatives``).

    Returns:
        A ``GradientPosterior`` (``batch_shape x d`` mean, ``batch_shape x d x d`` covariance).
    """
    parts = output_gradient_gps(model, jitter=jitter, method=method)
    if len(parts) != 1:
        raise NotImplementedError(
            f"The model has {len(parts)} outputs: take output_gradient_gps(model)[i].posterior(theta)."
        )
    return parts[0].posterior(theta)
