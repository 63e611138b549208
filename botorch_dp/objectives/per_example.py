r"""Per-user validation losses: one loss per validation example, capped at a public constant.

DP-GIBO clips each user's influence, so an objective must return one loss per validation
example (each example is a user). ``per_example_cross_entropy`` computes them for a
classifier; ``cap_losses`` replaces non-finite losses (a diverged model) and losses above a
public cap by the cap; ``per_user_error`` is the error that explains why a mean loss is
refused. Used by ``torch_classifier.TorchModelTuningObjective``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from botorch_dp.training.dp_sgd import model_dtype

__all__ = ["cap_losses", "per_example_cross_entropy", "per_user_error"]


def per_example_cross_entropy(model: nn.Module, X: Tensor, y: Tensor, *, loss_cap: float | None = None) -> Tensor:
    r"""Cross-entropy of each example under ``model`` (in eval mode, no gradients).

    Args:
        model: A classifier returning ``n x k`` logits.
        X: ``n x p`` features (cast to the model's dtype).
        y: ``n`` labels.
        loss_cap: If given, losses above it and non-finite ones (a diverged model)
            become ``loss_cap``. A public constant, so the losses stay a fixed function
            of the model; the privacy guarantee rests on clipping either way.

    Returns:
        An ``n`` float64 tensor.
    """
    was_training = model.training
    model.eval()
    with torch.no_grad():
        losses = F.cross_entropy(model(X.to(model_dtype(model))), y, reduction="none").to(torch.float64)
    model.train(was_training)
    return cap_losses(losses, loss_cap)


def cap_losses(losses: Tensor, loss_cap: float | None) -> Tensor:
    r"""``losses`` with non-finite entries and entries above ``loss_cap`` set to ``loss_cap``
    (unchanged when ``loss_cap`` is None)."""
    if loss_cap is None:
        return losses
    losses = torch.where(torch.isfinite(losses), losses, torch.full_like(losses, loss_cap))
    return losses.clamp(max=loss_cap)


def per_user_error(what: str) -> ValueError:
    r"""The ``ValueError`` for an objective that is not one loss per validation example."""
    return ValueError(
        f"{what}. DP-GIBO needs per-user losses: one loss per validation example (each "
        "example is a user), e.g. F.cross_entropy(outputs, targets, reduction='none'), so "
        "that each user's influence can be clipped; a mean over all examples would make "
        "the whole validation set one user and protect no person in it."
    )
