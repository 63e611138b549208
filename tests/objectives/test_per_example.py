"""Tests for botorch_dp/objectives/per_example.py: per-example losses, the public cap, the per-user error."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from botorch_dp.objectives.per_example import cap_losses, per_user_error
from botorch_dp.objectives.torch_classifier import per_example_cross_entropy as reexported
from botorch_dp.tuning import per_example_cross_entropy


def test_loss_cap_replaces_non_finite_losses():
    model = nn.Linear(2, 3)
    with torch.no_grad():
        model.weight.fill_(float("nan"))
    X, y = torch.randn(4, 2), torch.tensor([0, 1, 2, 0])
    out = per_example_cross_entropy(model, X, y, loss_cap=7.0)
    assert torch.equal(out, torch.full((4,), 7.0, dtype=torch.float64))
    assert torch.isnan(per_example_cross_entropy(model, X, y)).all()


def test_per_example_cross_entropy_is_the_unreduced_loss_and_keeps_the_mode():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2)).train()
    X, y = torch.randn(6, 3), torch.tensor([0, 1, 1, 0, 1, 0])
    out = per_example_cross_entropy(model, X, y)
    assert model.training  # restored after the eval-mode pass
    with torch.no_grad():
        logits = model.eval()(X)
    manual = -(logits.log_softmax(-1).gather(1, y[:, None]).squeeze(1))  # no dropout: eval mode
    assert out.dtype == torch.float64 and torch.allclose(out, manual.double(), atol=1e-6)
    assert reexported is per_example_cross_entropy  # the old import path still works


def test_cap_losses_is_a_clamp_at_the_cap_with_non_finite_losses_at_the_cap():
    losses = torch.tensor([0.5, 3.0, float("inf"), float("nan"), -float("inf")], dtype=torch.float64)
    assert torch.equal(cap_losses(losses, 2.0), torch.tensor([0.5, 2.0, 2.0, 2.0, 2.0], dtype=torch.float64))
    assert cap_losses(losses, None) is losses
    assert torch.equal(cap_losses(F.relu(torch.arange(3.0)).double(), 10.0), torch.arange(3.0).double())


def test_the_per_user_error_says_what_went_wrong_and_why():
    err = per_user_error("loss_fn returned shape () for 5 examples")
    assert isinstance(err, ValueError) and str(err).startswith("loss_fn returned shape () for 5 examples.")
    with pytest.raises(ValueError, match="one loss per validation example"):
        raise err
