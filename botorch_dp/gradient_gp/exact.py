r"""Reading one output of an exact BoTorch/GPyTorch GP: its training inputs, kernel, noise, prior
mean and outcome scale (``exact_gp_parts``), the parts a ``GradientGP`` is built from. It
imports no ``GradientGP``, so ``core`` (``GradientGP.from_model``) and ``models`` both use it."""

from __future__ import annotations

from typing import Any, Protocol, cast

import torch
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.means import ConstantMean, ZeroMean
from torch import Tensor

__all__ = ["BATCH_HINT", "exact_gp_parts"]

BATCH_HINT = (
    "Build one acquisition (or gradient posterior) per batch element, e.g. from a "
    "SingleTaskGP on train_X[i], train_Y[i]; several outputs are supported as a "
    "multi-output SingleTaskGP or a ModelListGP."
)


class _ExactGP(Protocol):
    r"""What ``exact_gp_parts`` reads from an exact GP (checked with ``hasattr`` first)."""

    train_inputs: tuple[Tensor, ...]
    train_targets: Tensor
    covar_module: Any  # a GPyTorch Kernel
    likelihood: Any  # a GPyTorch Likelihood


def _select(t: Tensor, output: int | None, m: int, size: int = 1) -> Tensor:
    r"""The ``size`` entries of one output from a per-output stack (or a shared tensor)."""
    t = t.detach().reshape(-1)
    if output is not None and t.numel() == m * size:
        return t.reshape(m, size)[output]
    if t.numel() != size:
        raise NotImplementedError(f"Cannot read one output from a tensor with {t.numel()} entries.")
    return t


def exact_gp_parts(model: torch.nn.Module, output: int | None) -> dict[str, Any]:
    r"""What a ``GradientGP`` of one output of an exact GP is built from, on its training inputs
    as stored: ``GradientGP(**exact_gp_parts(model, output), jitter=..., method=...)``.

    In eval mode BoTorch stores the transformed training inputs, so the result lives in
    the model's input space ``z`` (no chain rule here).
    """
    from botorch.models.gpytorch import BatchedMultiOutputGPyTorchModel
    from botorch.models.transforms.outcome import Standardize

    if not hasattr(model, "train_inputs") or not hasattr(model, "covar_module"):
        raise NotImplementedError(
            f"{type(model).__name__} is not an exact GP with train_inputs and a covar_module "
            "(e.g. SingleTaskGP); the gradient posterior needs one."
        )
    m = getattr(model, "num_outputs", 1)
    if m != 1 and not isinstance(model, BatchedMultiOutputGPyTorchModel):
        raise NotImplementedError(f"{type(model).__name__} with {m} outputs is not supported.")
    if m != 1 and output is None:
        raise NotImplementedError(f"The model has {m} outputs: pass output=i, or use output_gradient_gps(model).")
    if output is not None and not 0 <= output < m:
        raise ValueError(f"output={output} is out of range for a model with {m} outputs.")
    gp = cast(_ExactGP, model)  # duck-typed: nn.Module types its attributes as Tensor | Module
    train_X, train_Y = gp.train_inputs[0], gp.train_targets
    if m != 1:  # BoTorch stacks the outputs as the last batch dimension
        train_X, train_Y = train_X[..., output, :, :], train_Y[..., output, :]
    if train_X.dim() != 2:
        raise NotImplementedError(
            f"Batched models are not supported (training inputs of shape {tuple(train_X.shape)}): "
            "a batch of models has no single gradient posterior at θ. " + BATCH_HINT
        )
    N = train_X.shape[0]
    kernel = gp.covar_module
    if len(kernel.batch_shape) > 0:
        if m == 1 or tuple(kernel.batch_shape) != (m,):
            raise NotImplementedError(
                f"A kernel with batch_shape {tuple(kernel.batch_shape)} is not supported. " + BATCH_HINT
            )
        kernel = kernel[output]  # a copy with this output's hyperparameters
    mean_module = getattr(model, "mean_module", None)
    if mean_module is None or isinstance(mean_module, ZeroMean):
        mean_constant = 0.0
    elif isinstance(mean_module, ConstantMean):
        mean_constant = float(_select(mean_module.constant, output, m))
    else:
        raise NotImplementedError(f"Unsupported mean module {type(mean_module).__name__}.")
    likelihood = gp.likelihood
    noise: Tensor | float
    if isinstance(likelihood, FixedNoiseGaussianLikelihood):
        noise = _select(likelihood.noise, output, m, N)
    elif isinstance(likelihood, GaussianLikelihood):
        noise = float(_select(likelihood.noise, output, m))
    else:
        raise NotImplementedError(f"Unsupported likelihood {type(likelihood).__name__}.")
    output_scale = 1.0
    transform = getattr(model, "outcome_transform", None)
    if transform is not None:
        if not isinstance(transform, Standardize):
            raise NotImplementedError(f"Unsupported outcome transform {type(transform).__name__}.")
        output_scale = float(_select(transform.stdvs, output, m))
    return {
        "train_X": train_X,
        "kernel": kernel,
        "noise_variance": noise,
        "train_Y": train_Y,
        "mean_constant": mean_constant,
        "output_scale": output_scale,
    }
